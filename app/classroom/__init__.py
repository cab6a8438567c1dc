"""The live class: a class session, its students ' answers and the instructor's dashboard."""
