"""The ten episodes of the curriculum, in teaching order.

An episode is live when a lab view registers its slug (see app/labkit.py); the home page
marks the others as coming.
"""

from dataclasses import dataclass

from app.settings import url


@dataclass(frozen=True)
class Episode:
    number: int
    slug: str
    title: str
    question: str

    @property
    def code(self) -> str:
        return f"EP{self.number:02d}"

    @property
    def path(self) -> str:
        """The route's path inside the app (what a router registers)."""
        return f"/episodes/{self.slug}"

    @property
    def url(self) -> str:
        """The path as a browser asks for it: under BASE_PATH (app/settings.py)."""
        return url(self.path)


EPISODES: tuple[Episode, ...] = (
    Episode(1, "memory", "The memory ledger: it does not fit",
            "What does one training step hold in GPU memory, and why is one GPU not enough?"),
    Episode(2, "data-parallel", "Data parallelism: clone the model, split the batch",
            "What does a gradient all-reduce cost as GPUs are added, on each kind of link?"),
    Episode(3, "zero", "Sharding state: ZeRO and FSDP",
            "How much state does each ZeRO stage take off every GPU, and at what traffic?"),
    Episode(4, "tensor-parallel", "Tensor parallelism: split every matrix",
            "Where are the matrices cut, and why must TP stay inside the NVLink domain?"),
    Episode(5, "pipeline", "Pipeline parallelism: the assembly line and its bubble",
            "How much of a pipeline sits idle, and which schedule fills the gaps?"),
    Episode(6, "context-parallel", "Context parallelism: split the tokens",
            "How do ranks share one long sequence's causal attention evenly?"),
    Episode(7, "experts", "Experts: mixture-of-experts and expert parallelism",
            "How are experts placed on GPUs, and what does routing cost?"),
    Episode(8, "recipe-3d", "The 3D recipe",
            "How do TP, PP and DP combine into a plan that fits and runs fast?"),
    Episode(9, "rl-placement", "Placement for RL training",
            "Where do training ranks and rollout engines go on the cluster?"),
    Episode(10, "playground", "Recap and playground",
            "Every formula in one place, and a free playground over all controls."),
)

BY_SLUG = {episode.slug: episode for episode in EPISODES}
