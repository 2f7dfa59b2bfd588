"""Builders that turn raw data into ms-swift JSONL datasets."""
