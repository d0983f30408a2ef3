"""Dash Pages: one module per page, each calling `dash.register_page` and defining `layout`."""
