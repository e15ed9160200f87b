# SPDX-License-Identifier: Apache-2.0
"""The episode rule of docs/formats.md, written independently of mldiag's C++ for the test
scripts (tests/report/check_html.py, tests/tools/check_episodes.py): findings of the same
question, symptom and top location belong to one episode when a finding's first_step is at
most GAP steps after the episode's end (its largest last_step). Python 3 standard library only.
"""


def group(findings, gap, weight=lambda f: 1):
    """Episodes of `findings` (JSON finding objects, taken in the order given), each a dict with
    symptom, place, first_step, last_step and deliveries (the sum of `weight` of its findings)."""
    episodes, newest = [], {}
    for f in findings:
        place = f["location"][0]["name"] if f.get("location") else ""
        key = (f["question"], f["symptom"], place)
        end = max(f["first_step"], f["last_step"])
        e = newest.get(key)
        if e is not None and f["first_step"] - e["last_step"] <= gap:
            e["first_step"] = min(e["first_step"], f["first_step"])
            e["last_step"] = max(e["last_step"], end)
            e["deliveries"] += weight(f)
            continue
        e = {"symptom": f["symptom"], "place": place, "first_step": f["first_step"], "last_step": end,
             "deliveries": weight(f)}
        episodes.append(e)
        newest[key] = e
    return episodes
