"""Bring your own run: a pasted Megatron-LM or torchtitan log (or torch.cuda.memory_stats()
JSON) read into the plan it describes and what it measured, beside EP08's prediction."""
