"""The contract layers compute against: ForwardBatch and its attention metadata, the custom ops."""
