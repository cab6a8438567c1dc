"""A resent answer is stored once: the answer_ids table, one row per (student, answer id).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('answer_ids',
    sa.Column('student_id', sa.Integer(), nullable=False),
    sa.Column('answer_id', sa.String(length=64), nullable=False),
    sa.Column('class_id', sa.Integer(), nullable=False),
    sa.Column('drill_id', sa.String(length=80), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('tries', sa.Integer(), nullable=False),
    sa.Column('right', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['class_id'], ['classes.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['student_id'], ['students.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('student_id', 'answer_id')
    )


def downgrade() -> None:
    op.drop_table('answer_ids')
