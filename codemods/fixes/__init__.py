"""The code fixes write: new code printed as text, imports, branches, tensor code."""
