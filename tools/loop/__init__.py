"""The autoresearch loop: propose → change → run → judge → keep or discard → learn, as a state machine on disk.

``spec`` reads the loop file, ``proposal`` is what a proposer returns, ``priors`` is what it reads,
``proposers/`` holds the implementations (sweep, llm, queue), ``engine`` drives one iteration at a time.
"""
