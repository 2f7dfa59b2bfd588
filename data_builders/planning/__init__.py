"""Builders for the merchant-planner pipeline: teacher SFT rows and GRPO rows."""
