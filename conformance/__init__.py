"""The conformance suite: generic tests over scenario x family x the engine under test.

Shipped in the wheel with its pytest plugin (plugin.py), so an engine's own repository runs it
without a checkout of packcheck:

    pytest --pyargs packcheck.conformance --engine mypkg.adapter:MyEngine
"""
