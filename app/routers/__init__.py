"""One router per lab, plus the home page and drills."""
