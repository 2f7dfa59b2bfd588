"""Builders for the merchant-planner pipeline (seed 001): teacher SFT rows and GRPO rows."""
