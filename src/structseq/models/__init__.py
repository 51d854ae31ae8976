"""Model families (one file each, schema and builder beside the model), output heads, and the model
contract (`structseq.models.base`). Each family registers itself with `@register_arch`."""

from structseq.models.base import Autoregressive, Model, build_model

__all__ = ["Autoregressive", "Model", "build_model"]
