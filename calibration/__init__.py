"""Measuring traces on the local JAX devices, importing them, and fitting the model."""
