"""`python -m app`: serve the lab on http://127.0.0.1:8000 (HOST, PORT, WORKERS, LOG_LEVEL and
the app's settings from the environment: app/settings.py), with the request limits of
app/limits.py. `make run` and the container (Dockerfile, compose.yaml) start it this way.
`python -m app migrate`: bring the live class's database (DATA_DIR or DATABASE_URL) to the
newest schema and exit; serving does the same at start-up."""

import sys

import uvicorn


def main() -> None:
    try:
        # Importing app.settings reads the app's own settings (SETTINGS): a bad one raises
        # SettingsError there, before uvicorn imports the app.
        from app.settings import ServerSettings

        server = ServerSettings.from_env()
        if sys.argv[1:] == ["migrate"]:
            from app.classroom import db

            db.migrate()
            print(f"parallelism-lab: {db.describe()} is at the newest schema")
            return
    except ValueError as exc:
        if type(exc).__name__ != "SettingsError":
            raise
        sys.exit(f"parallelism-lab: {exc}")
    from app.limits import uvicorn_options

    uvicorn.run(
        "app.main:app", host=server.host, port=server.port, workers=server.workers,
        log_level=server.log_level, **uvicorn_options(),
    )


if __name__ == "__main__":
    main()
