"""schemathesis against /openapi.json, bounded (about 40 cases per operation, a few hundred in
all): no server error anywhere, and every rejection is a 4xx that says why."""

import schemathesis
from hypothesis import HealthCheck, settings

from app.main import app

schema = schemathesis.openapi.from_asgi("/openapi.json", app)
MAX_CASES_PER_OPERATION = 40


def test_drill_ids_are_an_enum():
    from app.labkit import DRILLS
    spec = app.openapi()["paths"]["/api/drills/{drill_id}"]["get"]
    (param,) = [p for p in spec["parameters"] if p["name"] == "drill_id"]
    assert param["schema"]["enum"] == sorted(DRILLS)


@schema.parametrize()
@settings(max_examples=MAX_CASES_PER_OPERATION, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_api_never_fails_and_every_rejection_says_why(case):
    response = case.call()
    assert response.status_code < 500, (case.path, case.query, response.text[:300])
    if 400 <= response.status_code < 500:
        body = response.json()
        detail = body["detail"]
        if isinstance(detail, list):
            assert detail and all(d["msg"] for d in detail), body
        else:
            assert isinstance(detail, str) and detail, body
