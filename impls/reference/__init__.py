"""The reference trainer: plain, readable PyTorch that every other engine is compared against."""
