"""The standalone HTML page: the widget's bundle and a dump's data in one offline file.

``snapshot`` writes the page's data blocks, ``page_attrs`` the attribute tables
the page reads on a click, ``gzip_parallel`` compresses on every core, and
``htmlpage`` fills the template; the CLI serves the same page. ``http_guard`` is
what both page servers (the CLI's, ``live_server``) refuse and how they log.
"""
