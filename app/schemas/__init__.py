"""The JSON answers of the lab APIs, as pydantic models: /docs documents them, and the route
tests validate every answer against them. The answers themselves are built by each router's
``to_api`` (plain dicts); these models describe, they are not on the hot path."""

from app.schemas.context_parallel import (  # noqa: F401
    CPAnswer,
    CPRank,
)
from app.schemas.data_parallel import (  # noqa: F401
    DataParallelAnswer,
    DataParallelPoint,
    DataParallelReplica,
)
from app.schemas.experts import (  # noqa: F401
    MoEAnswer,
    MoEGroupAnswer,
    MoERankMapAnswer,
)
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
from app.schemas.recipe import (  # noqa: E402, F401
    RecipeAnswer,
    RecipeAudit,
    RecipeReplanAnswer,
    RecipeResultAnswer,
    RecipeTraffic,
)
from app.schemas.rl import (  # noqa: E402, F401
    PlacementAnswer,
    PlacementCheck,
    PlacementPhase,
    PlacementPool,
)
from app.schemas.runs import (  # noqa: E402, F401
    RunDefaulted,
    RunFigure,
    RunMeasured,
    RunParseAnswer,
    RunParseRequest,
    RunResidual,
)
from app.schemas.tensor_parallel import (  # noqa: F401
    TensorParallelAnswer,
    TPCollective,
    TPCostRow,
    TPShapes,
    TPSweepRow,
)
from app.schemas.validation import (  # noqa: E402, F401
    ValidationAnswer,
    ValidationLayout,
    ValidationRun,
    ValidationSummary,
)
from app.schemas.zero import (  # noqa: F401
    DeepSpeedColumn,
    ZeroAnswer,
    ZeroOffload,
    ZeroRecompute,
    ZeroStageBar,
    ZeroTraffic,
    ZeroTransfer,
)
