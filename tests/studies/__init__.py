"""Studies and trials that tests of several packages share: built by hand, or run in this
process on the mock device (``mock``, ``tta``, ``loss``, ``verdicts``); a verification summary
built by hand (``summaries``); and the run configurations of the api tests (``runs``)."""
