"""Real Engine subclasses the tests plug in through `package.module:Class`, as users do."""
