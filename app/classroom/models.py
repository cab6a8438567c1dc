"""The live class's tables (SQLAlchemy Core): one class, its students, their answers and
where they are. Every row names its class and goes with it (ON DELETE CASCADE, and "End"
deletes each table's rows explicitly too, so SQLite without foreign keys loses nothing)."""

from sqlalchemy import (
                        Boolean,
                        Column,
                        DateTime,
                        Float,
                        ForeignKey,
                        Index,
                        Integer,
                        MetaData,
                        String,
                        Table,
                        UniqueConstraint,
)

metadata = MetaData()

CODE_LENGTH = 6
NICKNAME_LENGTH = 24
ANSWER_LENGTH = 40  # the drill routes' own bound on an answer (app/routers/home.py)
ID_LENGTH = 80  # drill, step and episode ids (static/js/progress.js keeps the same bound)
ANSWER_ID_LENGTH = 64  # the id a browser gives an answer (static/js/classroom.js: a UUID, 36)

classes = Table(
    "classes", metadata,
    Column("id", Integer, primary_key=True),
    Column("code", String(CODE_LENGTH), nullable=False, unique=True),
    # SHA-256 of the instructor's secret, hex: the secret itself is never stored.
    Column("key_hash", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False, index=True),
    Column("students", Integer, nullable=False, default=0),  # joined so far, for the bound
    # Pace: the class held at one step of one episode (both empty: free).
    Column("pace_episode", String(ID_LENGTH)),
    Column("pace_step", String(ID_LENGTH)),
)

students = Table(
    "students", metadata,
    Column("id", Integer, primary_key=True),
    Column("class_id", ForeignKey("classes.id", ondelete="CASCADE"), nullable=False),
    # SHA-256 of the session cookie's token, hex.
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("nickname", String(NICKNAME_LENGTH), nullable=False, default=""),
    Column("joined_at", DateTime(timezone=True), nullable=False),
    # Where the student is: the last step opened or tried.
    Column("episode", String(ID_LENGTH)),
    Column("step", String(ID_LENGTH)),
    Column("events", Integer, nullable=False, default=0),  # steps opened + tries, for the bound
    Index("ix_students_class_place", "class_id", "episode", "step"),
)

# One row per drill the class has touched: its round (a reset starts the next) and whether
# the instructor revealed the right answer and the class's spread.
drills = Table(
    "class_drills", metadata,
    Column("class_id", ForeignKey("classes.id", ondelete="CASCADE"), primary_key=True),
    Column("drill_id", String(ID_LENGTH), primary_key=True),
    Column("round", Integer, nullable=False, default=0),
    Column("revealed", Boolean, nullable=False, default=False),
)

# One row per student, drill and round: the latest answer and the first try's verdict, so the
# dashboard's counts and histogram are one GROUP BY on an index.
responses = Table(
    "responses", metadata,
    Column("id", Integer, primary_key=True),
    Column("class_id", ForeignKey("classes.id", ondelete="CASCADE"), nullable=False),
    Column("student_id", ForeignKey("students.id", ondelete="CASCADE"), nullable=False),
    Column("drill_id", String(ID_LENGTH), nullable=False),
    Column("round", Integer, nullable=False),
    Column("tries", Integer, nullable=False),
    Column("first_right", Boolean, nullable=False),
    Column("right", Boolean, nullable=False),  # the latest answer's verdict
    Column("answer", String(ANSWER_LENGTH), nullable=False),  # the latest, as graded
    Column("value", Float),  # the latest as a number (predict, derive); empty for a choice
    Column("answered_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("class_id", "drill_id", "round", "student_id", name="uq_response"),
)

# The answers a student's browser gave an id (static/js/classroom.js resends an answer that
# was not acknowledged, under the same id): one row per (student, id), so a resent answer is
# acknowledged again with its first verdict and stores nothing new, counts no extra try.
# Bounded by the answers themselves (MAX_TRIES per student, drill and round).
answer_ids = Table(
    "answer_ids", metadata,
    Column("student_id", ForeignKey("students.id", ondelete="CASCADE"), primary_key=True),
    Column("answer_id", String(ANSWER_ID_LENGTH), primary_key=True),
    Column("class_id", ForeignKey("classes.id", ondelete="CASCADE"), nullable=False),
    # The first delivery's acknowledgement, given again to a repeat.
    Column("drill_id", String(ID_LENGTH), nullable=False),
    Column("round", Integer, nullable=False),
    Column("tries", Integer, nullable=False),
    Column("right", Boolean, nullable=False),
)

# Try-it clicks per student and step (the steps opened are the students table's place).
tries = Table(
    "tries", metadata,
    Column("class_id", ForeignKey("classes.id", ondelete="CASCADE"), primary_key=True),
    Column("episode", String(ID_LENGTH), primary_key=True),
    Column("step", String(ID_LENGTH), primary_key=True),
    Column("clicks", Integer, nullable=False, default=0),
)

# Rate limits shared by every app process on the database (app/classroom/limits.py): one row
# per counted event (a join-code miss, a class started) of one client, pruned once older than
# its window, so a client holds at most its allowance of rows. Not a class's data: End and
# expiry leave it alone.
rate_hits = Table(
    "rate_hits", metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("client", String(64), nullable=False),  # the client's address
    Column("at", Float, nullable=False),  # seconds since the epoch (the app's clock)
    Index("ix_rate_hits_client", "kind", "client", "at"),
    Index("ix_rate_hits_at", "kind", "at"),
)

# Children first: the order End deletes.
TABLES = (answer_ids, tries, responses, drills, students, classes)
