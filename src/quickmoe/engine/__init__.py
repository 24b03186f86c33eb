"""Requests: Engine, Scheduler, Sequence, SamplingParams, the detokenizer and KV block accounting."""
