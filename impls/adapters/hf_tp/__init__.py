"""hf_tp: transformers' own tensor parallelism (DistributedConfig(tp_plan="auto"), DTensor) behind packcheck's Engine."""
