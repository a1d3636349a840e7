"""The Deep Agents backend: the standard suite on every provider, and its mapping."""
