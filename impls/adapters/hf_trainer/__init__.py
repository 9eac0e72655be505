"""packcheck adapter for the HF transformers `Trainer` with `DataCollatorWithFlattening` (packed) and
`DataCollatorForSeq2Seq` (padded), plus the variants that reproduce its known findings."""
