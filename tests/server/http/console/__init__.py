"""Tests of the web console (``qmgr.server.http.console``), a module per module: a
package, so that their module names may repeat others' (``test_pages``)."""
