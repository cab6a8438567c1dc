"""The live class: classes, students, their drills, responses and try-it clicks.

Revision ID: 0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table('classes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('code', sa.String(length=6), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('students', sa.Integer(), nullable=False),
    sa.Column('pace_episode', sa.String(length=80), nullable=True),
    sa.Column('pace_step', sa.String(length=80), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('code')
    )
    with op.batch_alter_table('classes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_classes_expires_at'), ['expires_at'], unique=False)

    op.create_table('class_drills',
    sa.Column('class_id', sa.Integer(), nullable=False),
    sa.Column('drill_id', sa.String(length=80), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('revealed', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['class_id'], ['classes.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('class_id', 'drill_id')
    )
    op.create_table('students',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('class_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('nickname', sa.String(length=24), nullable=False),
    sa.Column('joined_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('episode', sa.String(length=80), nullable=True),
    sa.Column('step', sa.String(length=80), nullable=True),
    sa.Column('events', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['class_id'], ['classes.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token_hash')
    )
    with op.batch_alter_table('students', schema=None) as batch_op:
        batch_op.create_index('ix_students_class_place',
                              ["class_id", "episode", "step"], unique=False)

    op.create_table('tries',
    sa.Column('class_id', sa.Integer(), nullable=False),
    sa.Column('episode', sa.String(length=80), nullable=False),
    sa.Column('step', sa.String(length=80), nullable=False),
    sa.Column('clicks', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['class_id'], ['classes.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('class_id', 'episode', 'step')
    )
    op.create_table('responses',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('class_id', sa.Integer(), nullable=False),
    sa.Column('student_id', sa.Integer(), nullable=False),
    sa.Column('drill_id', sa.String(length=80), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('tries', sa.Integer(), nullable=False),
    sa.Column('first_right', sa.Boolean(), nullable=False),
    sa.Column('right', sa.Boolean(), nullable=False),
    sa.Column('answer', sa.String(length=40), nullable=False),
    sa.Column('value', sa.Float(), nullable=True),
    sa.Column('answered_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['class_id'], ['classes.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['student_id'], ['students.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('class_id', 'drill_id', 'round', 'student_id', name='uq_response')
    )



def downgrade() -> None:

    op.drop_table('responses')
    op.drop_table('tries')
    with op.batch_alter_table('students', schema=None) as batch_op:
        batch_op.drop_index('ix_students_class_place')

    op.drop_table('students')
    op.drop_table('class_drills')
    with op.batch_alter_table('classes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_classes_expires_at'))

    op.drop_table('classes')

