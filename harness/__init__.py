"""packcheck's harness: the engine-neutral half of the product.

It defines the contract an engine implements (`packcheck.harness.contract`, `packcheck.harness.engines`), builds the
cases the golden scenarios need, runs an engine on them and judges the results. It never imports
`impls`: the reference trainer is just the first engine plugged in.
"""
