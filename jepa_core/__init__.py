"""jepa_core: train JEPA models and make their failures visible early.

The design this code keeps is docs/design.md; a comment's "design §n" points to its section n.
"""

__version__ = "0.1.0"
