"""Widgets: the virtual list (Line API) and its session / turn / timeline flavours, panels."""
