"""Named exceptions. The CLI turns any `FeatdelError` into a one-line error and a non-zero exit."""


class FeatdelError(Exception):
    """Base class: the message is one line that says what to do."""


class SourceError(FeatdelError):
    """A source (path, git URL, PyPI spec) could not be resolved to a pinned git tree."""


class CorpusError(FeatdelError):
    """A corpus manifest is missing or malformed."""


class EnvBuildError(FeatdelError):
    """A repository's environment could not be built (an install failed)."""


class SandboxError(FeatdelError):
    """The sandbox itself broke or is unavailable: not the code under test."""


class RunDirError(FeatdelError):
    """A run directory is missing a stage's output or holds something unexpected."""


class PublishError(FeatdelError):
    """A dataset could not be published to or fetched from the Hub (token, network, layout)."""


class TrainError(FeatdelError):
    """A training run cannot start or continue as asked."""


class ModelError(FeatdelError):
    """A named pretrained model cannot be fetched, converted or found (featdel.trainer.pretrained)."""
