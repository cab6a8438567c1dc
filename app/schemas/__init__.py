"""The JSON answers of the lab APIs, as pydantic models: /docs documents them, and the route
tests validate every answer against them. The answers themselves are built by each router's
``to_api`` (plain dicts); these models describe, they are not on the hot path."""

from app.schemas.failures import (  # noqa: E402, F401
    FailuresAnswer,
    FailuresCheckpoint,
    FailuresGoodput,
    FailuresScalePoint,
)
from app.schemas.memory_pipeline import (  # noqa: F401
    Event,
    EventColumns,
    MemoryAnswer,
    PipelineAnswer,
    StageMemoryAnswer,
)
from app.schemas.models import ParsedModel  # noqa: E402, F401
from app.schemas.parallelism import (  # noqa: F401
    CPAnswer,
    CPRank,
    DataParallelAnswer,
    DataParallelPoint,
    DataParallelReplica,
    DeepSpeedColumn,
    MoEAnswer,
    MoEGroupAnswer,
    MoERankMapAnswer,
    TensorParallelAnswer,
    TPCollective,
    TPCostRow,
    TPShapes,
    TPSweepRow,
    ZeroAnswer,
    ZeroOffload,
    ZeroRecompute,
    ZeroStageBar,
    ZeroTraffic,
    ZeroTransfer,
)
from app.schemas.plans import (  # noqa: F401
    PlacementAnswer,
    PlacementCheck,
    PlacementPhase,
    PlacementPool,
    RecipeAnswer,
    RecipeAudit,
    RecipeReplanAnswer,
    RecipeResultAnswer,
    RecipeTraffic,
)
from app.schemas.playground import (  # noqa: F401, E402
    CheatLine,
    CheatSheetAnswer,
    CheatTerm,
    CompareAnswer,
    CompareSide,
    PlaygroundAnswer,
    PlaygroundPanel,
)
from app.schemas.precision import PrecisionAnswer  # noqa: E402, F401
from app.schemas.runs import (  # noqa: E402, F401
    RunDefaulted,
    RunFigure,
    RunMeasured,
    RunParseAnswer,
    RunParseRequest,
    RunResidual,
)
from app.schemas.validation import (  # noqa: E402, F401
    ValidationAnswer,
    ValidationLayout,
    ValidationRun,
    ValidationSummary,
)
