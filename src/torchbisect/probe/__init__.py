"""The probe contract: which scripts probe, and the document a probe writes.

scripts.py  where the probe scripts live, which cases they hold, and their version (fingerprint)
document.py the gate a probe's JSON document passes before it is stored or drawn
"""
