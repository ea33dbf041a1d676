"""The lowest layer: types, errors and timing every other subpackage may import (and that import none of them)."""
