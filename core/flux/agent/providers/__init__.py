"""Model providers behind one streaming interface (:mod:`.base`)."""
