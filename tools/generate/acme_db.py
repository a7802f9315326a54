"""Write worlds/acme-acquisition/db/matter.sqlite from the records below.

The generated file is committed; run this only when the records change:

    .venv/bin/python tools/generate/acme_db.py

The records agree with the documents, except one on purpose: the contracts row of the Quanta licence
says change_of_control = 'none', while clause 14.3 of the licence makes it terminate on a change of
control unless Quanta consents. tests/datasets/test_acme_world.py checks both facts.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

TARGET = Path(__file__).resolve().parents[2] / "worlds/acme-acquisition/db/matter.sqlite"

SCHEMA = """
CREATE TABLE matter (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE parties (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('company', 'individual', 'bank', 'law_firm')),
    jurisdiction TEXT NOT NULL,
    role TEXT NOT NULL,
    notice_address TEXT
);
CREATE TABLE documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    doc_type TEXT NOT NULL,
    doc_date TEXT NOT NULL,
    contract_id INTEGER REFERENCES contracts (id),
    privileged INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE contracts (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    contract_type TEXT NOT NULL,
    counterparty_id INTEGER NOT NULL REFERENCES parties (id),
    document_id INTEGER NOT NULL REFERENCES documents (id),
    effective_date TEXT NOT NULL,
    expiry_date TEXT,
    governing_law TEXT NOT NULL,
    auto_renewal INTEGER NOT NULL,
    change_of_control TEXT NOT NULL CHECK (change_of_control IN
        ('none', 'consent', 'termination_right', 'notice', 'prepayment', 'payment')),
    coc_clause TEXT,
    liability_cap REAL,
    cap_currency TEXT,
    exclusivity TEXT
);
CREATE TABLE financial_terms (
    id INTEGER PRIMARY KEY,
    contract_id INTEGER NOT NULL REFERENCES contracts (id),
    kind TEXT NOT NULL,
    amount REAL NOT NULL,
    currency TEXT NOT NULL,
    clause TEXT NOT NULL
);
CREATE TABLE key_dates (
    id INTEGER PRIMARY KEY,
    contract_id INTEGER NOT NULL REFERENCES contracts (id),
    date TEXT NOT NULL,
    kind TEXT NOT NULL,
    description TEXT NOT NULL
);
CREATE TABLE obligations (
    id INTEGER PRIMARY KEY,
    contract_id INTEGER NOT NULL REFERENCES contracts (id),
    party_id INTEGER NOT NULL REFERENCES parties (id),
    clause TEXT NOT NULL,
    obligation TEXT NOT NULL,
    due TEXT,
    status TEXT NOT NULL
);
CREATE TABLE consent_requests (
    id INTEGER PRIMARY KEY,
    contract_id INTEGER NOT NULL REFERENCES contracts (id),
    counterparty_id INTEGER NOT NULL REFERENCES parties (id),
    status TEXT NOT NULL CHECK (status IN
        ('to_send', 'drafted', 'sent', 'granted', 'conditional', 'refused')),
    requested_on TEXT,
    responded_on TEXT,
    letter_path TEXT,
    note TEXT
);
"""

MATTER = [
    ("name", "Project Falcon"),
    ("client", "Acme Corp"),
    ("target", "Beta Ltd"),
    ("transaction", "Acquisition by Acme Corp of the entire issued share capital of Beta Ltd"),
    ("law_firm", "Hale & Whitcombe LLP"),
    ("responsible_partner", "Rachel Morgan"),
    ("as_of", "2024-04-05"),
]

PARTIES = [
    (1, "Acme Corp", "company", "Delaware", "buyer",
     "1200 Market Street, Wilmington, Delaware 19801, USA"),
    (2, "Beta Ltd", "company", "England and Wales", "target",
     "Unit 7, Trafford Park, Manchester M17 1AB"),
    (3, "Northwind Metals plc", "company", "England and Wales", "supplier",
     "40 Riverside Way, Sheffield S9 2RX"),
    (4, "Kestrel Automotive GmbH", "company", "Germany", "customer",
     "Legal Department, Industriestraße 12, 70565 Stuttgart, Germany"),
    (5, "Polaris Plastics Ltd", "company", "Scotland", "supplier",
     "3 Clyde Gateway, Glasgow G40 2QH"),
    (6, "Orion Distribution Inc.", "company", "New York", "distributor",
     "250 West 34th Street, Suite 1800, New York, NY 10119"),
    (7, "Lumen Trading Pte. Ltd.", "company", "Singapore", "distributor",
     "8 Marina View, #21-04, Asia Square Tower 1, Singapore 018960"),
    (8, "Vega Iberia S.L.", "company", "Spain", "distributor",
     "Calle de Alcalá 95, 28009 Madrid, Spain"),
    (9, "Quanta Systems Ltd", "company", "Ireland", "licensor",
     "14 Sir John Rogerson's Quay, Dublin 2, D02 X576, Ireland"),
    (10, "Helix Brands LLC", "company", "Delaware", "licensee",
     "600 Congress Avenue, Suite 1400, Austin, TX 78701"),
    (11, "Stratus Cloud Ltd", "company", "England and Wales", "service provider",
     "20 Old Street, London EC1V 9AB"),
    (12, "Gamma Partners LLP", "company", "England and Wales", "prospective investor",
     "5 King William Street, London EC4N 7DA"),
    (13, "Pennine Property Ltd", "company", "England and Wales", "landlord",
     "1 Piccadilly Gardens, Manchester M1 1RG"),
    (14, "Aire Valley Estates Ltd", "company", "England and Wales", "landlord",
     "9 Wellington Place, Leeds LS1 4AP"),
    (15, "Havenzicht Vastgoed B.V.", "company", "the Netherlands", "landlord",
     "Wilhelminakade 77, 3072 AP Rotterdam, the Netherlands"),
    (16, "Northgate Bank plc", "bank", "England and Wales", "lender",
     "100 Bishopsgate, London EC2N 4AG"),
    (17, "Swift Freight Ltd", "company", "Scotland", "service provider",
     "22 Seaward Street, Glasgow G41 1HJ"),
    (18, "Fernhill Advisory Ltd", "company", "England and Wales", "consultant",
     "12 St Ann's Square, Manchester M2 7HW"),
    (19, "Sarah Whitfield", "individual", "England and Wales", "employee",
     "14 Oakfield Road, Altrincham WA15 8EP"),
    (20, "David Okafor", "individual", "England and Wales", "employee",
     "22 Lapwing Lane, Manchester M20 2NT"),
    (21, "Mei Tanaka", "individual", "England and Wales", "employee",
     "7 Didsbury Park, Manchester M20 5LH"),
    (22, "Hale & Whitcombe LLP", "law_firm", "England and Wales", "buyer's counsel", None),
]  # fmt: skip

C, E, B, A, L, X = "contract", "employment", "board_minutes", "advice", "letter", "email"
DOCUMENTS = [
    # id, path, title, doc_type, doc_date, contract_id, privileged
    (1, "documents/contracts/supply-northwind-metals.md", "Aluminium Supply Agreement",
     C, "2021-04-01", 1, 0),
    (2, "documents/contracts/supply-kestrel-automotive.docx", "Component Supply Agreement",
     C, "2022-07-01", 2, 0),
    (3, "documents/contracts/supply-polaris-plastics.txt",
     "Supply Agreement (Moulded Components)", C, "2023-01-16", 3, 0),
    (4, "documents/contracts/distribution-orion.md", "Exclusive Distribution Agreement",
     C, "2022-01-01", 4, 0),
    (5, "documents/contracts/distribution-orion-amendment-1.md",
     "Amendment No. 1 to the Exclusive Distribution Agreement", "amendment", "2023-11-15", 4, 0),
    (6, "documents/contracts/distribution-lumen-trading.pdf", "Distribution Agreement",
     C, "2023-05-01", 5, 0),
    (7, "documents/contracts/distribution-vega-iberia.docx", "Distribution Agreement",
     C, "2021-10-01", 6, 0),
    (8, "documents/contracts/licence-quanta-systems.docx",
     "Patent and Software Licence Agreement", C, "2020-02-01", 7, 0),
    (9, "documents/contracts/licence-helix-brands.md", "Trade Mark Licence Agreement",
     C, "2022-03-01", 8, 0),
    (10, "documents/contracts/licence-stratus-cloud.txt",
     "Cloud Services Subscription Agreement", C, "2023-09-01", 9, 0),
    (11, "documents/contracts/nda-acme-beta.md", "Mutual Confidentiality Agreement",
     C, "2024-01-15", 10, 0),
    (12, "documents/contracts/nda-gamma-partners.txt", "Non-Disclosure Agreement",
     C, "2023-06-01", 11, 0),
    (13, "documents/contracts/lease-manchester-hq.md", "Lease of Unit 7, Trafford Park",
     C, "2019-03-25", 12, 0),
    (14, "documents/contracts/lease-leeds-warehouse.docx",
     "Lease of Warehouse 3, Stourton Industrial Park", C, "2022-06-24", 13, 0),
    (15, "documents/contracts/lease-rotterdam-depot.pdf", "Lease Agreement (Depot, Waalhaven)",
     C, "2021-01-01", 14, 0),
    (16, "documents/employment/employment-sarah-whitfield.md",
     "Service Agreement — Chief Executive Officer", E, "2018-09-03", 15, 0),
    (17, "documents/employment/employment-david-okafor.docx",
     "Service Agreement — Chief Financial Officer", E, "2020-01-06", 16, 0),
    (18, "documents/employment/employment-mei-tanaka.txt",
     "Contract of Employment — Chief Technology Officer", E, "2021-05-10", 17, 0),
    (19, "documents/contracts/credit-agreement-northgate.pdf",
     "Revolving Credit Facility Agreement", C, "2022-06-30", 18, 0),
    (20, "documents/contracts/services-swift-freight.md", "Logistics Services Agreement",
     C, "2023-03-01", 19, 0),
    (21, "documents/contracts/consultancy-fernhill.txt", "Consultancy Agreement",
     C, "2024-01-08", 20, 0),
    (22, "documents/board/board-minutes-beta-2024-02-20.md", "Beta Ltd board minutes",
     B, "2024-02-20", None, 1),
    (23, "documents/board/board-minutes-acme-2024-03-05.docx", "Acme Corp board minutes",
     B, "2024-03-05", None, 1),
    (24, "documents/advice/counsel-memo-change-of-control.md",
     "Memorandum: change-of-control review", A, "2024-03-18", None, 1),
    (25, "documents/correspondence/letter-beta-to-northgate-2024-03-12.md",
     "Letter from Beta Ltd to Northgate Bank plc", L, "2024-03-12", 18, 0),
    (26, "documents/correspondence/letter-northgate-reply-2024-03-28.pdf",
     "Letter from Northgate Bank plc to Beta Ltd", L, "2024-03-28", 18, 0),
    (27, "documents/correspondence/email-kestrel-2024-04-02.txt",
     "Email from Kestrel Automotive GmbH (notices)", X, "2024-04-02", 2, 0),
    (28, "documents/correspondence/email-orion-2024-02-15.txt",
     "Email from Orion Distribution Inc.", X, "2024-02-15", 4, 0),
    (29, "documents/correspondence/letter-pennine-rent-review-2024-01-10.md",
     "Letter from Pennine Property Ltd (rent review)", L, "2024-01-10", 12, 0),
    (30, "documents/correspondence/letter-quanta-2023-09-04.md",
     "Letter from Quanta Systems Ltd (royalty audit)", L, "2023-09-04", 7, 0),
    (31, "documents/data-room-index.md", "Project Falcon data room index",
     "index", "2024-04-02", None, 0),
    (32, "documents/exhibits/exhibit-c-northwind-signature-page.png",
     "Exhibit C — signed signature page, Northwind supply agreement (scan)",
     "exhibit", "2021-04-01", 1, 0),
]  # fmt: skip

EW = "England and Wales"
CONTRACTS = [
    # id, title, type, counterparty, document, effective, expiry, law, auto_renewal,
    # change_of_control, coc_clause, liability_cap, cap_currency, exclusivity
    (1, "Aluminium Supply Agreement", "supply", 3, 1, "2021-04-01", "2026-03-31", EW, 1,
     "termination_right", "7.3", 2000000, "GBP", None),
    (2, "Component Supply Agreement", "supply", 4, 2, "2022-07-01", "2027-06-30", EW, 0,
     "consent", "18.2", 2500000, "EUR", "Exclusive supplier of battery enclosures in the EEA"),
    (3, "Supply Agreement (Moulded Components)", "supply", 5, 3, "2023-01-16", "2025-01-15",
     "Scotland", 1, "none", None, 500000, "GBP", None),
    (4, "Exclusive Distribution Agreement", "distribution", 6, 4, "2022-01-01", "2026-12-31",
     "New York", 0, "consent", "10.2", 1500000, "USD",
     "Exclusive distributor in the United States and Canada"),
    (5, "Distribution Agreement", "distribution", 7, 6, "2023-05-01", "2026-04-30",
     "Singapore", 1, "none", None, 1000000, "SGD", None),
    (6, "Distribution Agreement", "distribution", 8, 7, "2021-10-01", "2026-09-30", "Spain", 1,
     "notice", "6.1", 750000, "EUR", "Exclusive distributor in Spain and Portugal"),
    # The deliberate contradiction: clause 14.3 of the licence requires Quanta's consent.
    (7, "Patent and Software Licence Agreement", "licence", 9, 8, "2020-02-01", "2030-01-31",
     "Ireland", 0, "none", None, 1000000, "EUR", None),
    (8, "Trade Mark Licence Agreement", "licence", 10, 9, "2022-03-01", "2027-02-28",
     "Delaware", 0, "notice", "6.1", 750000, "USD",
     "Exclusive licence of the BETAFORM mark in North America"),
    (9, "Cloud Services Subscription Agreement", "services", 11, 10, "2023-09-01",
     "2025-08-31", EW, 1, "none", None, 180000, "GBP", None),
    (10, "Mutual Confidentiality Agreement", "nda", 1, 11, "2024-01-15", "2027-01-15", EW, 0,
     "none", None, None, None, None),
    (11, "Non-Disclosure Agreement", "nda", 12, 12, "2023-06-01", "2025-06-01", EW, 0,
     "none", None, None, None, None),
    (12, "Lease of Unit 7, Trafford Park", "lease", 13, 13, "2019-03-25", "2029-03-24", EW, 0,
     "consent", "5.2", None, None, None),
    (13, "Lease of Warehouse 3, Stourton Industrial Park", "lease", 14, 14, "2022-06-24",
     "2027-06-23", EW, 0, "none", None, None, None, None),
    (14, "Lease Agreement (Depot, Waalhaven)", "lease", 15, 15, "2021-01-01", "2025-12-31",
     "the Netherlands", 1, "none", None, None, None, None),
    (15, "Service Agreement — Chief Executive Officer", "employment", 19, 16, "2018-09-03",
     None, EW, 0, "termination_right", "4.1", None, None, None),
    (16, "Service Agreement — Chief Financial Officer", "employment", 20, 17, "2020-01-06",
     None, EW, 0, "payment", "4.1", None, None, None),
    (17, "Contract of Employment — Chief Technology Officer", "employment", 21, 18,
     "2021-05-10", None, EW, 0, "none", None, None, None, None),
    (18, "Revolving Credit Facility Agreement", "finance", 16, 19, "2022-06-30", "2027-06-30",
     EW, 0, "prepayment", "8.1", None, None, None),
    (19, "Logistics Services Agreement", "services", 17, 20, "2023-03-01", "2026-02-28",
     "Scotland", 1, "termination_right", "5.1", 1000000, "GBP", None),
    (20, "Consultancy Agreement", "services", 18, 21, "2024-01-08", "2024-12-31", EW, 0,
     "none", None, 50000, "GBP", None),
]  # fmt: skip

FINANCIAL_TERMS = [
    (1, 4, "minimum annual purchases", 4000000, "USD", "3.1"),
    (2, 8, "minimum annual royalty", 120000, "USD", "3.1"),
    (3, 9, "annual subscription fee", 164000, "GBP", "3.1"),
    (4, 12, "annual rent", 420000, "GBP", "2.1"),
    (5, 13, "annual rent", 96000, "GBP", "2.1"),
    (6, 14, "annual rent", 150000, "EUR", "3.1"),
    (7, 15, "annual salary", 310000, "GBP", "3.1"),
    (8, 16, "annual salary", 220000, "GBP", "3.1"),
    (9, 16, "change-of-control retention bonus", 100000, "GBP", "4.1"),
    (10, 17, "annual salary", 240000, "GBP", "2.1"),
    (11, 18, "facility commitment", 25000000, "GBP", "2.1"),
    (12, 7, "annual software support fee", 85000, "EUR", "5.1"),
]

KEY_DATES = [
    (1, 1, "2026-03-31", "expiry", "End of the initial term; renews for 12 months unless notice"),
    (2, 1, "2025-09-30", "renewal_notice_deadline", "Last day for six months' non-renewal notice"),
    (3, 2, "2027-06-30", "expiry", "End of term; no automatic renewal"),
    (4, 3, "2025-01-15", "expiry", "End of the initial term; renews for one year unless notice"),
    (5, 4, "2026-12-31", "expiry", "End of the Term as extended by Amendment No. 1"),
    (6, 5, "2026-04-30", "expiry", "End of term; renews for one year unless 90 days' notice"),
    (7, 6, "2026-09-30", "expiry", "End of term; renews for one year unless notice"),
    (8, 7, "2030-01-31", "expiry", "End of the licence term"),
    (9, 8, "2027-02-28", "expiry", "End of term; renewable by agreement"),
    (10, 9, "2025-08-31", "expiry", "End of the initial subscription period"),
    (11, 10, "2027-01-15", "expiry", "Confidentiality obligations end"),
    (12, 11, "2025-06-01", "expiry", "Confidentiality obligations end"),
    (13, 12, "2024-03-25", "rent_review", "Upward-only rent review to open market rent"),
    (14, 12, "2025-09-25", "break_notice_deadline", "Last day to serve the break notice"),
    (15, 12, "2026-03-25", "break", "Tenant's break date"),
    (16, 12, "2029-03-24", "expiry", "End of the lease term"),
    (17, 13, "2027-06-23", "expiry", "End of the lease term"),
    (18, 14, "2025-12-31", "expiry", "End of term; renews for five years unless 12 months' notice"),
    (19, 18, "2027-06-30", "expiry", "Termination Date of the facility"),
    (20, 18, "2024-09-30", "consent_condition", "Northgate's consent lapses unless completion"),
    (21, 19, "2026-02-28", "expiry", "End of term; renews for one year unless notice"),
    (22, 20, "2024-12-31", "expiry", "End of the consultancy"),
]

OBLIGATIONS = [
    (1, 7, 2, "4.2", "Quarterly royalty report and payment of 4 per cent of Net Sales",
     "30 days after each calendar quarter", "ongoing"),
    (2, 7, 2, "5.1", "Annual QWeld support fee of €85,000", "annually", "overdue"),
    (3, 2, 2, "18.2", "Request Kestrel's consent at least 30 days before a change of control",
     None, "open"),
    (4, 4, 6, "3.1", "Orion to buy at least $4,000,000 of Products a year ($4,750,000 from 2025)",
     "each calendar year", "ongoing"),
    (5, 8, 10, "3.1", "Helix to pay a 6 per cent royalty, at least $120,000 a year",
     "quarterly", "ongoing"),
    (6, 18, 2, "10.1", "Leverage not above 3.00:1 and Interest Cover not below 4.00:1",
     "each quarterly test date", "ongoing"),
    (7, 18, 2, "8.1", "Notify the Lender promptly of a Change of Control", None, "open"),
    (8, 12, 2, "6.1", "Serve any break notice at least six months before the Break Date",
     "2025-09-25", "open"),
    (9, 1, 2, "7.3", "Notify Northwind within 10 business days after a Change of Control",
     None, "open"),
    (10, 6, 2, "6.1", "Notify Vega within 30 days after a change of control", None, "open"),
    (11, 8, 2, "6.1", "Notify Helix within 30 days after a change of control", None, "open"),
    (12, 10, 1, "4.1", "Acme not to solicit Beta's senior employees", "2025-01-15", "ongoing"),
]  # fmt: skip

CONSENT_REQUESTS = [
    (1, 18, 16, "conditional", "2024-03-12", "2024-03-28",
     "documents/correspondence/letter-beta-to-northgate-2024-03-12.md",
     "Consent subject to completion by 30 September 2024, an Acme guarantee and a £62,500 fee"),
]  # fmt: skip

TABLES = {
    "matter": MATTER,
    "parties": PARTIES,
    "documents": DOCUMENTS,
    "contracts": CONTRACTS,
    "financial_terms": FINANCIAL_TERMS,
    "key_dates": KEY_DATES,
    "obligations": OBLIGATIONS,
    "consent_requests": CONSENT_REQUESTS,
}


def build(target: Path = TARGET) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    db = sqlite3.connect(target)
    try:
        with db:
            db.executescript(SCHEMA)
            for table, rows in TABLES.items():
                marks = ", ".join("?" * len(rows[0]))
                db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        db.execute("VACUUM")
    finally:
        db.close()
    return target


if __name__ == "__main__":
    print(build())
