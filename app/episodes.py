"""The labs of the curriculum, in teaching order: the one list the app is built from.

Each entry names its episode (number, slug, title, question) and its lab (``lab``), the one
internal name its files follow (app/labkit/view.py reads the templates from it):

- ``labs/<lab>/``: the engine (a lab may use another's: EP07's ``moe`` runs ``labs/experts``);
- ``app/routers/<lab>.py``: its view (``register(router, VIEW)``), plus ``extra_routers``;
- ``app/charts/<lab>.py``: its figures;
- ``templates/episodes/<lab>.html`` (the lesson), ``templates/partials/_<lab>.html`` (the
  diagram section) and ``templates/partials/_<lab>_controls.html`` (the form).

app/main.py includes every lab's routers in this order; the home page, ``/api/diagrams``, the
README's episode table (tools/readme_episodes.py), the tests, the screenshots and the
benchmarks read it. An episode is live when its lab view registers (the home page marks the
others as coming). The public names (``/episodes/<slug>``, ``/api/<view name>``,
``/embed/<view name>``) are the view's and the slug's: they never change with ``lab``.
"""

from dataclasses import dataclass

from app.settings import url


@dataclass(frozen=True)
class Episode:
    number: int
    slug: str
    title: str
    question: str
    lab: str  # the internal name: app/routers/<lab>.py, templates, charts (see above)
    extra_routers: tuple[str, ...] = ()  # more modules of app/routers/ the lab serves

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

    @property
    def routers(self) -> tuple[str, ...]:
        """The modules of app/routers/ this lab serves, its own first."""
        return (f"app.routers.{self.lab}", *(f"app.routers.{r}" for r in self.extra_routers))


EPISODES: tuple[Episode, ...] = (
    Episode(1, "memory", "The memory ledger: it does not fit",
            "What does one training step hold in GPU memory, and why is one GPU not enough?",
            lab="memory"),
    Episode(2, "data-parallel", "Data parallelism: clone the model, split the batch",
            "What does a gradient all-reduce cost as GPUs are added, on each kind of link?",
            lab="data_parallel"),
    Episode(3, "zero", "Sharding state: ZeRO and FSDP",
            "How much state does each ZeRO stage take off every GPU, and at what traffic?",
            lab="zero"),
    Episode(4, "tensor-parallel", "Tensor parallelism: split every matrix",
            "Where are the matrices cut, and why must TP stay inside the NVLink domain?",
            lab="tensor_parallel"),
    Episode(5, "pipeline", "Pipeline parallelism: the assembly line and its bubble",
            "How much of a pipeline sits idle, and which schedule fills the gaps?",
            lab="pipeline"),
    Episode(6, "context-parallel", "Context parallelism: split the tokens",
            "How do ranks share one long sequence's causal attention evenly?",
            lab="context_parallel"),
    Episode(7, "experts", "Experts: mixture-of-experts and expert parallelism",
            "How are experts placed on GPUs, and what does routing cost?",
            lab="moe"),
    Episode(8, "recipe-3d", "The 3D recipe",
            "How do TP, PP and DP combine into a plan that fits and runs fast?",
            lab="recipe", extra_routers=("plan", "validation", "runs")),
    Episode(9, "rl-placement", "Placement for RL training",
            "Where do training ranks and rollout engines go on the cluster?",
            lab="rl"),
    Episode(10, "playground", "Recap and playground",
            "Every formula in one place, and a free playground over all controls.",
            lab="playground", extra_routers=("cheatsheet", "compare")),
    Episode(11, "low-precision", "Low precision and fine-tuning",
            "Where does every byte of an FP8 run, a LoRA or QLoRA fine-tune and an activation "
            "offload live, and what does each save?",
            lab="precision"),
)

BY_SLUG = {episode.slug: episode for episode in EPISODES}
BY_LAB = {episode.lab: episode for episode in EPISODES}
