"""Rate limits shared by every app process on one database: the rate_hits table.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('rate_hits',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('client', sa.String(length=64), nullable=False),
    sa.Column('at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('rate_hits', schema=None) as batch_op:
        batch_op.create_index('ix_rate_hits_client', ['kind', 'client', 'at'], unique=False)
        batch_op.create_index('ix_rate_hits_at', ['kind', 'at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('rate_hits', schema=None) as batch_op:
        batch_op.drop_index('ix_rate_hits_at')
        batch_op.drop_index('ix_rate_hits_client')
    op.drop_table('rate_hits')
