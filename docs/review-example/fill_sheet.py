"""Fill review/queue.csv as the worked example's reviewer did in a spreadsheet (docs/review.md).

Run from the project root after `classify review export`; it only writes the decision columns of
five rows, exactly what a reviewer would type into those cells.
"""
import csv, io, json
p='review/queue.csv'
rows=list(csv.DictReader(io.StringIO(open(p,encoding='utf-8-sig').read())))
fields=list(rows[0])
killed="a bare 'Killed' during compilation with no OOM message, dmesg line or MAX_JOBS fix (root cause not identifiable)"
fill={
 ('cutlass-88','root_cause'): dict(action='set', label='documentation_defect', note='typos in the quickstart example, fixed by the maintainers in 2.3',
     proposal='add_category', proposal_category='documentation_defect', proposal_name='Documentation defect', proposal_group='usage',
     proposal_text="The library's documentation, docstrings or official examples are wrong or inconsistent with the code, and following them as written fails (misspelled include in a quickstart, wrong 'equivalent code')."),
 ('flashinfer-4451','root_cause'): dict(action='keep', proposal='add_include', proposal_category='algorithm_logic',
     proposal_text='a finite sentinel standing in for masked or empty values (e.g. -5e4 for masked scores) is reachable by legitimate inputs, so valid data is handled as masked',
     more_proposals=json.dumps([{"kind":"add_cue","dimension":"root_cause","category":"numerical_precision","cue":"exclude",
        "text":"a finite sentinel for masked values that valid inputs reach (algorithm_logic)"}])),
 ('cutlass-339','root_cause'): dict(action='keep', proposal='add_exclude', proposal_category='environment_misconfiguration', proposal_text=killed),
 ('flash-attention-358','root_cause'): dict(action='keep', proposal='add_exclude', proposal_category='environment_misconfiguration', proposal_text=killed),
 ('bitsandbytes-1930','root_cause'): dict(action='keep', proposal='edit_definition', proposal_category='build_configuration',
     proposal_text="The library's build scripts or configuration are wrong: setup.py/CMake logic, compiler flags, the architecture list of a source build the user runs, include paths, platform support in the build (Windows/MSVC), build parallelism settings. An architecture missing from a prebuilt, published wheel is packaging_distribution."),
}
n=0
for r in rows:
    k=(r['id'],r['dimension'])
    if k in fill:
        r.update(fill[k]); n+=1
assert n==5, n
buf=io.StringIO(); w=csv.DictWriter(buf, fieldnames=fields); w.writeheader(); w.writerows(rows)
open(p,'w',encoding='utf-8').write(buf.getvalue())
