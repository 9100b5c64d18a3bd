"""The shop on the web: one Flask app (:mod:`~gagpo.servers.webshop.web.app`) with two views,
HTML pages for people and browsers (:mod:`~gagpo.servers.webshop.web.pages_view`, rendered by
:mod:`~gagpo.servers.webshop.html` from its ``templates/``, with ``static/`` here) and a JSON API
for programs (:mod:`~gagpo.servers.webshop.web.api_view`, its sessions in signed tokens:
:mod:`~gagpo.servers.webshop.web.tokens`), served by :mod:`~gagpo.servers.webshop.web.serve`
(``gagpo serve webshop``).
"""
