"""EP12 answers: the playground (every shown lab's own answer) and the cheat sheet."""

from pydantic import BaseModel, Field


class PlaygroundPanel(BaseModel):
    episode: str = Field(description="The lab's episode code, e.g. EP05.")
    diagrams: list[str] = Field(description="The lab's diagrams shown.")
    query: str = Field(description="The lab's own URL query for this state "
                                   "(/api/<lab>?<query> answers the same).")
    errors: dict[str, str] = Field(description="Playground control -> why the lab cannot draw "
                                               "this state (empty when it can).")
    note: str = Field(description="Why the lab's model does not draw this state (EP02 and "
                                  "EP03 model data parallelism alone); empty when it does.")
    answer: dict | None = Field(description="The lab's own JSON answer (GET /api/<lab>).")


class PlaygroundAnswer(BaseModel):
    panels: dict[str, PlaygroundPanel] = Field(description="Each shown lab, by its API name.")


class CheatTerm(BaseModel):
    symbol: str
    value: float
    unit: str = Field(description="bytes, B/s, s, duration (seconds, shown in days or "
                      "hours), flops, flop/s, count, fraction or an empty string (a plain "
                      "number).")
    meaning: str


class CheatLine(BaseModel):
    key: str
    episode: str = Field(description="Episode code, e.g. EP05.")
    title: str
    formula: str
    source: str
    terms: list[CheatTerm] = Field(description="The worked example's inputs.")
    result: CheatTerm | None = Field(description="What the lab's engine gives for them "
                                                 "(null: the lab refuses the example).")
    note: str = Field(description="Why the lab refuses the example (empty when it does not).")
    link: str = Field(description="The episode step that teaches it, at the same example.")


class CheatSheetAnswer(BaseModel):
    model: str
    gpu: str
    lines: list[CheatLine]


class CompareSide(BaseModel):
    query: str = Field(description="The side's playground query.")
    url: str = Field(description="The side's playground page.")
    metrics: dict[str, float | bool | None]
    errors: dict[str, str]


class CompareAnswer(BaseModel):
    a: CompareSide
    b: CompareSide
    differs: list[str] = Field(description="The metrics whose values differ.")
