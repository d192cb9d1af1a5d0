"""The HTTP service and the evidence web page: ``simgrag serve INDEX_DIR`` (needs ``simgrag[serve]``)."""

from simgrag.serve.app import ServeSettings, create_app
from simgrag.serve.queue import LLMQueue

__all__ = ["LLMQueue", "ServeSettings", "create_app"]
