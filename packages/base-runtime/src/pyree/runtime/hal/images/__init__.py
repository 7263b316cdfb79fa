"""Structural checks of executable images (ELF, PTX, SPIR-V) before a loader sees them.

A module's code bytes go to loaders that trust them: dlopen maps an ELF's segments from its
headers and faults on pages past the end, CUDA's and Vulkan's loaders crash or hang on a cut
image. These checks read only what the image says about itself and refuse one that contradicts
its own length or structure. The runtime's verifier and the drivers (through the SDK) share them.
"""

from __future__ import annotations


class ImageError(ValueError):
    """An image contradicts its own structure; the message says how, without saying where
    (callers add which executable it is)."""
