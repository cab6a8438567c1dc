"""The one error every lab raises for inputs that are out of range or inconsistent."""


class LabInputError(ValueError):
    """An input the lab cannot simulate, named by its control (query) field.

    The web layer turns this into a 422 in JSON and a message by the control in
    the page, so ``message`` is written for a student: say what is wrong and
    what would be accepted.
    """

    def __init__(self, field: str, message: str, also: tuple[str, ...] = ()) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.also = also  # other controls the message names (a pairing of two that clash)
