"""Sans-IO codecs for the RSocket metadata extensions (``shared/specs/rsocket-1.0/Extensions/``).

* :mod:`.mimetypes`: the well-known MIME type table and MIME type constants;
* :mod:`.composite`: composite metadata (``CompositeMetadata.md``);
* :mod:`.routing`: routing tags (``Routing.md``);
* :mod:`.auth`: authentication, simple, bearer and custom types (``Security/``);
* :mod:`.mime`: per-stream data MIME type and accept MIME types
  (``PerStreamDataMimeTypesDefinition.md``);
* :mod:`.tracing`: Zipkin tracing (``Tracing-Zipkin.md``);
* :mod:`.metadata`: :func:`parse_metadata` / :func:`build_metadata` for requesters and responders.

Nothing here does I/O or imports Twisted.  ``encode_*`` raise ``TypeError``/``ValueError`` for a
caller's wrong argument; ``decode_*`` raise :class:`MetadataDecodeError` for malformed bytes;
:func:`decode_composite` and :func:`parse_metadata` never raise.
"""

from . import auth, composite, metadata, mime, mimetypes, routing, tracing
from .auth import *  # noqa: F403
from .composite import *  # noqa: F403
from .metadata import *  # noqa: F403
from .mime import *  # noqa: F403
from .mimetypes import *  # noqa: F403
from .routing import *  # noqa: F403
from .tracing import *  # noqa: F403

# every module's public names, re-exported here
__all__ = [name for module in (mimetypes, composite, routing, auth, mime, tracing, metadata)
           for name in module.__all__]
