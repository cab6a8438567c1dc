"""The glossary's table: every term of art the lessons use (``GLOSSARY``), each a ``Term``:
its entry's anchor, its name as the glossary lists it, how lessons write it (a regular
expression), its definition and its source. ``app.glossary`` marks each term's first use in a
lesson (``define_terms``); GET /glossary lists them (app/routers/home.py).

The terms live by topic: ``splits`` (the parallelisms, batches and schedules), ``comms``
(collectives, NCCL, links), ``compute`` (kernels, utilisation, number formats) and
``workloads`` (MoE, long context, RL, failures, run reports). Their order matters only where
two terms match the same words from the same place: the earlier one wins."""

from app.glossary_terms.comms import TERMS as COMMS
from app.glossary_terms.compute import TERMS as COMPUTE
from app.glossary_terms.splits import TERMS as SPLITS
from app.glossary_terms.term import Term
from app.glossary_terms.workloads import TERMS as WORKLOADS

GLOSSARY: tuple[Term, ...] = (*SPLITS, *COMMS, *COMPUTE, *WORKLOADS)

__all__ = ["GLOSSARY", "Term"]
