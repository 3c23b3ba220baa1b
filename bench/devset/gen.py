#!/usr/bin/env python3
"""Generate the retrieval dev set: long two-person chats over months, with labelled questions.

Deterministic (one seed, standard library only). Writes bench/devset/devset.json:

    {"meta": {...},
     "conversations": [{"id", "speakers": [a, b],
                        "sessions": [{"id": 1, "date": "2023-05-08T13:56:00Z",
                                      "turns": [{"id": "D1:1", "speaker", "text"}]}]}],
     "questions": [{"conv", "id", "kind", "question", "evidence": ["D3:5", ...], "answer",
                    "date"?, "date_precision"?, "subtype"?}]}

Each conversation is built from storylines (a pet adopted, a job switched, a trip planned and
moved, a hobby taken up, a wedding, a move, an injury, ...). A storyline puts a few short
exchanges into sessions months apart, and writes its questions while it writes the turns, so
every question's evidence is the turns that say the fact. Small talk, check-ins and distractor
turns (same words, other people or no fact) fill each session to 15-30 turns.

    python3 bench/devset/gen.py                 # writes bench/devset/devset.json
    python3 bench/devset/gen.py --stats         # and prints counts and word-overlap figures
"""

import argparse
import datetime as dt
import json
import os
import random
import re
import sys

SEED = 20261203
KIND_TARGETS = {  # questions per conversation
    "single-hop": 16,
    "multi-hop": 6,
    "temporal": 6,
    "open-domain": 4,
    "adversarial": 8,
}

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
WDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def dstr(d):
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def mstr(d):
    return f"{MONTHS[d.month - 1]} {d.year}"


def fill(s, d):
    """Replace {key} by d[key]; a missing key is a bug."""
    def rep(m):
        k = m.group(1)
        if k not in d:
            raise KeyError(f"slot {k!r} missing in template {s!r}")
        return str(d[k])
    return re.sub(r"\{(\w+)\}", rep, s)


def cap(s):
    return s[:1].upper() + s[1:]


def ordinal(n):
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


def article(w):
    return ("an " if w[:1].lower() in "aeiou" else "a ") + w


# ---------------------------------------------------------------------------------------------
# Relative dates: a phrase said in a session of a known date, and the date it means.

class Rel:
    def __init__(self, phrase, date, prec, answer):
        self.phrase, self.date, self.prec, self.answer = phrase, date, prec, answer


def rel_past(rng, sd, after=None, kinds=None):
    """A past event told in a session on day sd: 'last weekend', 'on Tuesday', ..."""
    kinds = list(kinds or ["yesterday", "weekday", "weekday", "last_weekend", "last_weekend",
                           "last_week", "days_ago", "weeks_ago"])
    rng.shuffle(kinds)
    for k in kinds + ["yesterday"]:
        r = _rel_past(rng, sd, k)
        if after is None or r.date > after:
            return r
    return Rel("earlier today", sd, "day", dstr(sd))


def _rel_past(rng, sd, k):
    if k == "yesterday":
        d = sd - dt.timedelta(days=1)
        return Rel("yesterday", d, "day", dstr(d))
    if k == "weekday":
        d = sd - dt.timedelta(days=rng.randint(2, 6))
        w = WDAYS[d.weekday()]
        return Rel(rng.choice([f"on {w}", f"last {w}", f"this past {w}"]), d, "day", dstr(d))
    if k == "last_weekend":
        back = sd.weekday() - 5 + 7 if sd.weekday() >= 5 else sd.weekday() + 2
        d = sd - dt.timedelta(days=back)
        ph = "over the weekend" if sd.weekday() <= 2 else "last weekend"
        return Rel(ph, d, "weekend", f"the weekend before {dstr(sd)}")
    if k == "last_week":
        d = sd - dt.timedelta(days=sd.weekday() + 7)
        return Rel(rng.choice(["last week", "sometime last week"]), d, "week",
                   f"the week before {dstr(sd)}")
    if k == "days_ago":
        n = rng.choice([2, 3])
        d = sd - dt.timedelta(days=n)
        return Rel({2: "a couple of days ago", 3: "three days ago"}[n], d, "day", dstr(d))
    if k == "weeks_ago":
        d = sd - dt.timedelta(days=14)
        return Rel("two weeks ago", d, "week", f"two weeks before {dstr(sd)}")
    if k == "last_month":
        first = sd.replace(day=1) - dt.timedelta(days=1)
        d = first.replace(day=1)
        return Rel("last month", d, "month", mstr(d))
    raise ValueError(k)


def rel_future(rng, sd, kinds=None):
    kinds = kinds or ["tomorrow", "weekday", "next_week", "in_weeks", "nth", "nth"]
    k = rng.choice(kinds)
    if k == "tomorrow":
        d = sd + dt.timedelta(days=1)
        return Rel("tomorrow", d, "day", dstr(d))
    if k == "weekday":
        d = sd + dt.timedelta(days=rng.randint(2, 6))
        w = WDAYS[d.weekday()]
        return Rel(rng.choice([f"on {w}", f"this {w}", f"this coming {w}"]), d, "day", dstr(d))
    if k == "next_week":
        d = sd + dt.timedelta(days=7 - sd.weekday())
        return Rel("next week", d, "week", f"the week after {dstr(sd)}")
    if k == "in_weeks":
        n = rng.choice([2, 3])
        d = sd + dt.timedelta(days=7 * n)
        return Rel({2: "in two weeks", 3: "in three weeks"}[n], d, "week",
                   f"{n} weeks after {dstr(sd)}")
    if k == "nth":
        day = rng.randint(1, 28)
        if day > sd.day + 2:
            d = sd.replace(day=day)
        else:
            nm = (sd.replace(day=28) + dt.timedelta(days=5)).replace(day=day)
            d = nm
        return Rel(f"on the {ordinal(day)}", d, "day", dstr(d))
    if k == "next_month":
        d = (sd.replace(day=28) + dt.timedelta(days=5)).replace(day=1)
        return Rel("next month", d, "month", mstr(d))
    raise ValueError(k)


def back_phrase(sd, d):
    """How someone says 'we got back on day d', speaking on day sd (> d)."""
    n = (sd - d).days
    if n <= 0:
        return Rel("this morning", sd, "day", dstr(sd))
    if n == 1:
        return Rel("yesterday", d, "day", dstr(d))
    if n <= 6:
        return Rel(f"on {WDAYS[d.weekday()]}", d, "day", dstr(d))
    if n <= 13:
        return Rel("last week", d, "week", f"the week before {dstr(sd)}")
    return Rel("a couple of weeks ago", d, "week", f"a couple of weeks before {dstr(sd)}")


# ---------------------------------------------------------------------------------------------
# Pools

NAMES = [("Caroline", "f"), ("Melanie", "f"), ("Jon", "m"), ("Gina", "f"), ("Tomás", "m"),
         ("Priya", "f"), ("Kenji", "m"), ("Aisha", "f"), ("Marco", "m"), ("Hannah", "f"),
         ("Olu", "m"), ("Freya", "f"), ("Dmitri", "m"), ("Lucía", "f"), ("Sam", "m"),
         ("Nadia", "f"), ("Theo", "m"), ("Yara", "f"), ("Ben", "m"), ("Mei", "f"),
         ("Rafael", "m"), ("Ingrid", "f"), ("Kofi", "m"), ("Zoe", "f"), ("Arjun", "m"),
         ("Elena", "f"), ("Mateo", "m"), ("Chloe", "f"), ("Idris", "m"), ("Sofia", "f"),
         ("Liam", "m"), ("Anya", "f"), ("Noah", "m"), ("Leila", "f"), ("Oscar", "m"),
         ("Maren", "f"), ("Jamal", "m"), ("Rosa", "f"), ("Felix", "m"), ("Amara", "f"),
         ("Declan", "m"), ("Tessa", "f"), ("Hugo", "m"), ("Wren", "f"), ("Ravi", "m"),
         ("Bea", "f"), ("Callum", "m"), ("Ines", "f"), ("Joel", "m"), ("Kira", "f")]
OTHER_F = ["Dana", "Ellie", "Farah", "Ruth", "Keisha", "Lorna", "Suki", "Alba", "Vera", "Clara",
           "Moira", "Harriet", "Bridget", "Pam", "Jade", "Tilly", "Maddie", "Lena", "Philippa", "Nora",
           "Grace", "Lottie", "Imogen", "Rhea"]
OTHER_M = ["Marcus", "Rob", "Tim", "Pete", "Omar", "Greg", "Niall", "Dev", "Abe", "Luca", "Sol",
           "Emeka", "Rory", "Stefan", "Kwame", "Ivo", "Kai", "Andre", "Fergus", "Hamid", "Ezra", "Tariq",
           "Gus", "Owen"]
OTHER_NAMES = OTHER_F + OTHER_M

CITIES = [  # (city, southern hemisphere, neighbourhoods, a nearby town)
    ("Portland", False, ["Sellwood", "St Johns", "Alberta"], "Hood River"),
    ("Austin", False, ["Hyde Park", "Mueller", "Zilker"], "Wimberley"),
    ("Leeds", False, ["Headingley", "Chapel Allerton", "Kirkstall"], "Otley"),
    ("Melbourne", True, ["Fitzroy", "Brunswick", "Footscray"], "Daylesford"),
    ("Toronto", False, ["Leslieville", "the Annex", "Roncesvalles"], "Hamilton"),
    ("Dublin", False, ["Phibsborough", "Rathmines", "Stoneybatter"], "Bray"),
    ("Denver", False, ["Capitol Hill", "Highland", "Baker"], "Boulder"),
    ("Edinburgh", False, ["Leith", "Marchmont", "Stockbridge"], "North Berwick"),
    ("Vancouver", False, ["Kitsilano", "Mount Pleasant", "Strathcona"], "Squamish"),
    ("Bristol", False, ["Bedminster", "Montpelier", "Totterdown"], "Clevedon"),
    ("Minneapolis", False, ["Longfellow", "Northeast", "Whittier"], "Stillwater"),
    ("Glasgow", False, ["Finnieston", "Dennistoun", "Shawlands"], "Largs"),
    ("Auckland", True, ["Ponsonby", "Grey Lynn", "Mount Eden"], "Devonport"),
    ("Seattle", False, ["Ballard", "Fremont", "Columbia City"], "Port Townsend"),
    ("Montreal", False, ["Mile End", "Verdun", "Rosemont"], "Sutton"),
    ("Pittsburgh", False, ["Lawrenceville", "Squirrel Hill", "Bloomfield"], "Ohiopyle"),
    ("Halifax", False, ["the North End", "Dartmouth", "Quinpool"], "Lunenburg"),
    ("Brighton", False, ["Kemptown", "Hove", "Preston Park"], "Lewes"),
    ("Cork", False, ["Douglas", "Blackrock", "Shandon"], "Kinsale"),
    ("Wellington", True, ["Aro Valley", "Newtown", "Island Bay"], "Martinborough"),
]

DESTS = [  # (place, food, activity, activity said when back)
    ("Lisbon", "pastéis de nata", "ride the old trams", "we got lost in Alfama every single night"),
    ("Kyoto", "okonomiyaki", "see the temples", "we walked the bamboo grove at six in the morning before the crowds"),
    ("Reykjavik", "lamb soup", "see the northern lights", "we snorkelled between two tectonic plates, in a drysuit, in the freezing water"),
    ("Mexico City", "tacos al pastor", "see the murals", "we rented a little boat on the canals in Xochimilco"),
    ("Crete", "dakos", "go hiking", "we hiked the whole Samaria gorge, sixteen kilometres"),
    ("Vienna", "Sachertorte", "go to a concert", "we got standing tickets at the opera for like five euros"),
    ("Marrakech", "tagine", "wander the souks", "we did a cooking class in the medina"),
    ("Seoul", "fried chicken", "go hiking", "we hiked Bukhansan and I nearly died on the last bit"),
    ("Porto", "francesinha", "drink port", "we did a cellar tour across the river and I bought way too much"),
    ("Oaxaca", "mole negro", "see the markets", "we swam in the mineral pools up in the mountains"),
    ("Hanoi", "bún chả", "eat street food", "we did a street food tour on the back of motorbikes"),
    ("Tbilisi", "khachapuri", "try the wine", "we spent a whole afternoon in the sulphur baths"),
    ("Bergen", "fish soup", "see the fjords", "we took a boat out to the fjords and saw porpoises"),
    ("Sardinia", "culurgiones", "go to the beach", "we kayaked into these sea caves that were glowing blue"),
    ("New Orleans", "beignets", "hear live jazz", "we went to a jazz brunch that lasted five hours"),
    ("Copenhagen", "smørrebrød", "cycle around", "we biked absolutely everywhere, even in the rain"),
    ("Buenos Aires", "choripán", "learn some tango", "we took a tango class and I stepped on everyone"),
    ("Hoi An", "cao lầu", "get clothes tailored", "we made paper lanterns with a local family"),
    ("Dubrovnik", "black risotto", "walk the old town", "we walked the whole city wall at sunset"),
    ("Palermo", "arancini", "eat", "we drove up Mount Etna and the ground was still warm"),
    ("Seville", "salmorejo", "see flamenco", "we saw a tiny flamenco show in a bar, maybe twenty people there"),
    ("Budapest", "lángos", "go to the baths", "we spent a whole day in the thermal baths"),
    ("Kraków", "pierogi", "see the old town", "we went down into the salt mine, there's a whole chapel made of salt"),
    ("Istanbul", "simit", "take the ferries", "we took the ferry across to the Asian side just for lunch"),
]

TRIP_REASONS = [
    ("{comp}'s work wouldn't give {co} the time off", "work wouldn't give the time off"),
    ("the flights doubled in price overnight", "the flights got too expensive"),
    ("my cousin moved her wedding to that exact weekend", "a cousin's wedding clashed with it"),
    ("there's a big strike planned at the airport for those dates", "an airport strike was planned"),
    ("I'm buried at work until the end of the quarter", "work was too busy"),
    ("our landlord scheduled the renovation for that week and someone has to be home", "a home renovation was scheduled"),
]
TRIP_MISHAPS = [
    ("{comp} left {cp} passport in the taxi on the first day", "a passport was left in a taxi"),
    ("our bags went to a completely different city and took three days to find us", "the luggage got lost for three days"),
    ("I got the worst sunburn of my life on day two", "a bad sunburn"),
    ("we missed the last train back and had to sleep in the station", "they missed the last train and slept in the station"),
    ("it rained every single day except the last one", "it rained nearly every day"),
    ("I dropped my phone in the sea, so no photos from me", "a phone dropped in the sea"),
]

WORKPLACES = {  # role -> employers that would hire one
    "graphic designer": ["Brightpath Studio", "Cobalt Design", "Foxglove Studio", "Saltmarsh Media"],
    "software engineer": ["Kestrel Systems", "Lantern Games", "Juniper Labs", "Bluefin Analytics"],
    "chemistry teacher": ["Harbor Point School", "Pinecrest Academy", "St Aidan's High", "Northgate College"],
    "sous chef": ["Willow Street Bistro", "Ember Kitchen", "The Copper Pot", "Marlowe's"],
    "accountant": ["Oakridge Partners", "Meridian Group", "Hollis & Vane", "Greyfield Accountancy"],
    "physiotherapist": ["Summit Physio", "Riverbend Clinic", "Mosaic Health", "Halcyon Health"],
    "architect": ["Fieldstone Architects", "Atlas Studio", "Larch & Stone", "Northlight Architects"],
    "data analyst": ["Redwood Analytics", "Bluefin Analytics", "Northwind Logistics", "Tidewater Labs"],
    "veterinary nurse": ["Parkside Veterinary", "Oak Lane Vets", "Harbourside Animal Hospital", "Greenway Vets"],
    "librarian": ["Beacon Hill Library", "the central library", "Quill Publishing's archive", "the university library"],
    "UX researcher": ["Kestrel Systems", "Lantern Games", "Juniper Labs", "Lumen & Co"],
    "project manager": ["Ironbark Engineering", "Copperline Energy", "Atlas Civic", "Meridian Group"],
    "social worker": ["Granite Bay Council", "the county council", "Harbourside Family Services", "Atlas Civic"],
    "marketing coordinator": ["Greenleaf Foods", "Saltmarsh Media", "Lumen & Co", "Quill Publishing"],
    "lab technician": ["Tidewater Labs", "Juniper Labs", "Halcyon Health", "the university hospital"],
    "pharmacist": ["Crescent Pharmacy", "Mosaic Health", "Riverbend Clinic", "Willowbrook Pharmacy"],
    "civil engineer": ["Ironbark Engineering", "Atlas Civic", "Granite Bay Council", "Copperline Energy"],
    "translator": ["Lumen & Co", "Quill Publishing", "Babel Bridge", "Polyglot Partners"],
}
ROLES = [  # (role, a workplace noun, interview task)
    ("graphic designer", "agency", "a presentation of three projects from my portfolio"),
    ("software engineer", "company", "two hours of live coding while three people watched"),
    ("chemistry teacher", "school", "a mock lesson with a class of real fifteen-year-olds"),
    ("sous chef", "restaurant", "a trial shift in the kitchen on a Friday night"),
    ("accountant", "firm", "a written case study about a made-up company's books"),
    ("physiotherapist", "clinic", "a practical assessment on an actor pretending to have a bad knee"),
    ("architect", "practice", "a design exercise in forty-five minutes"),
    ("data analyst", "company", "a take-home task that took my whole weekend"),
    ("veterinary nurse", "practice", "a morning shadowing in the surgery"),
    ("librarian", "library", "a talk on how I'd get teenagers into the library"),
    ("UX researcher", "company", "a role-play interview with a fake grumpy user"),
    ("project manager", "firm", "a panel of four people asking about budgets"),
    ("social worker", "council", "a written exercise on a case file"),
    ("marketing coordinator", "company", "a pitch for a campaign I had one day to put together"),
    ("lab technician", "lab", "a practical test with pipettes, my hands were shaking"),
    ("pharmacist", "pharmacy", "a scenario test with tricky prescriptions"),
    ("civil engineer", "firm", "a technical interview about drainage, of all things"),
    ("translator", "agency", "a timed translation of a contract"),
]
GRIEVANCES = [
    ("my manager {boss} moves every meeting at the last minute and then asks why things are late",
     "the manager kept moving meetings and blaming {P} for delays"),
    ("we've been short-staffed since spring, I'm basically doing two jobs",
     "short-staffing meant doing two jobs"),
    ("I've asked {boss} for a promotion three times now and it's always 'next year'",
     "promotion kept being postponed"),
    ("the commute is an hour and twenty minutes each way and I'm losing my mind",
     "the long commute"),
    ("they cut our team's budget again and {boss} pretends it's fine",
     "repeated budget cuts"),
]
FOODS_BROUGHT = ["banana bread", "cinnamon buns", "samosas", "brownies", "lemon drizzle cake",
                 "empanadas", "a whole tray of baklava", "homemade dumplings"]

DOGS = ["beagle mix", "greyhound", "border collie", "corgi", "staffy cross", "golden retriever",
        "dachshund", "whippet", "husky mix", "black Labrador", "miniature schnauzer",
        "cocker spaniel", "shiba inu", "pug", "lurcher", "Jack Russell"]
CATS = ["grey tabby", "black cat", "Maine Coon", "ginger tabby", "tortoiseshell", "Siamese mix"]
PET_NAMES = ["Pixel", "Biscuit", "Mango", "Juniper", "Waffles", "Pepper", "Miso", "Ziggy", "Luna",
             "Otis", "Bramble", "Noodle", "Toast", "Mabel", "Fig", "Rocket", "Basil",
             "Clementine", "Moose", "Tofu", "Pickle", "Bean", "Olive", "Nacho"]
SWALLOWED = {"dog": ["a whole sock", "half a corn cob", "three hair ties", "a chunk of a rubber duck",
                     "a tea towel", "one of my earrings", "a peach stone"],
             "cat": ["a hair tie", "a bit of tinsel", "one of my earrings", "a length of string",
                     "a rubber band"]}
TRAINING = {"dog": [("an obedience class", "roll over on command"),
                    ("agility classes", "run through the tunnel without stopping halfway"),
                    ("a puppy manners course", "sit and wait at the kerb"),
                    ("scent work classes", "find a treat hidden in a box")],
            "cat": [("harness training", "walk on a lead in the garden"),
                    ("clicker training", "give a high five")]}
SHELTERS = ["the {city} Humane Society", "a rescue place out past {town}", "Second Chance Rescue",
            "the animal shelter by the ring road", "Happy Tails rescue"]

HOBBIES = {
    "pottery": dict(
        cls="a beginner wheel-throwing class at {venue}", short="the pottery thing",
        struggle="My clay flew off the wheel twice and I got slip in my hair.",
        achieve="made a mug that actually holds coffee. It leans a bit but it holds coffee",
        achieve_q="What was the first usable thing {P} made in {Pp} ceramics class?",
        achieve_a="a mug (it leans a bit)",
        mile="the studio picked two of my bowls for their winter sale",
        mile_q="What did the studio choose to do with {P}'s work?",
        mile_a="put two of {Pp} bowls in its winter sale",
        start_q="What class did {P} start going to?", start_a="a beginner pottery (wheel-throwing) class",
        trait="creative", label="pottery"),
    "bouldering": dict(
        cls="an intro session at the bouldering gym in {hood}", short="the climbing",
        struggle="My forearms were dead after twenty minutes, I couldn't open a jar that night.",
        achieve="finally got up the purple V3 in the corner that I've been stuck on for weeks",
        achieve_q="Which route did {P} finally manage at the gym?", achieve_a="the purple V3 in the corner",
        mile="I entered the beginners' comp at the gym and came fourth",
        mile_q="How did {P} place in the competition?", mile_a="fourth, in the beginners' competition",
        start_q="What sport did {P} try out for the first time?", start_a="bouldering (indoor climbing)",
        trait="sporty", label="bouldering"),
    "watercolour": dict(
        cls="a watercolour evening class at {venue}", short="the painting class",
        struggle="Everything I painted turned into the same muddy brown puddle.",
        achieve="painted the view from our balcony at sunset and I don't hate it",
        achieve_q="What scene did {P} paint that {Ps} was happy with?",
        achieve_a="the view from the balcony at sunset",
        mile="someone actually bought one of my paintings at the {town} art fair",
        mile_q="What happened at the {town} art fair?", mile_a="someone bought one of {P}'s paintings",
        start_q="What creative class did {P} join?", start_a="a watercolour evening class",
        trait="creative", label="watercolour painting"),
    "salsa": dict(
        cls="a salsa taster night at {venue}", short="the dancing",
        struggle="I stepped on my partner's feet about forty times.",
        achieve="got through a whole song without counting out loud",
        achieve_q="What small win did {P} have in {Pp} dance class?",
        achieve_a="getting through a whole song without counting out loud",
        mile="our class danced at the end-of-term showcase and I didn't fall over once",
        mile_q="What did {P}'s class do at the end of term?", mile_a="performed at the showcase",
        start_q="What kind of dancing did {P} take up?", start_a="salsa",
        trait="music", label="salsa dancing"),
    "sourdough": dict(
        cls="a bread-baking workshop at {venue}", short="the bread obsession",
        struggle="My starter died in four days. RIP Doughy.",
        achieve="baked a loaf with a proper open crumb, like the ones in the bakery",
        achieve_q="What baking milestone did {P} reach?", achieve_a="a loaf with a proper open crumb",
        mile="the café down the road is selling my loaves on Saturdays now",
        mile_q="Where can people buy {P}'s bread?", mile_a="at the café down the road, on Saturdays",
        start_q="What workshop did {P} go to?", start_a="a bread-baking (sourdough) workshop",
        trait="foodie", label="sourdough baking"),
    "ukulele": dict(
        cls="a group ukulele lesson at {venue}", short="the ukulele",
        struggle="My fingertips are on fire, how do people do this for fun.",
        achieve="can play Riptide all the way through without looking",
        achieve_q="What song can {P} play now?", achieve_a="Riptide",
        mile="I played two songs at the open mic at {venue2} and nobody threw anything",
        mile_q="Where did {P} perform?", mile_a="at the open mic at {venue2}",
        start_q="What instrument did {P} start learning?", start_a="the ukulele",
        trait="music", label="ukulele"),
    "woodworking": dict(
        cls="a weekend woodworking course at {venue}", short="the woodwork",
        struggle="I measured everything twice and still cut it wrong.",
        achieve="built a little bookshelf for the hallway and it doesn't wobble",
        achieve_q="What piece of furniture did {P} build?", achieve_a="a small bookshelf for the hallway",
        mile="I made a cot for {friend}'s baby, with the baby's name carved on the end",
        mile_q="What did {P} make for {friend}'s baby?", mile_a="a cot with the baby's name carved in it",
        start_q="What course did {P} sign up for?", start_a="a weekend woodworking course",
        trait="creative", label="woodworking"),
    "running": dict(
        cls="a couch-to-5k group that meets at {venue}", short="the running",
        struggle="I was the slowest in the group by a mile. Literally.",
        achieve="ran my first 5k without stopping once",
        achieve_q="What running goal did {P} hit?", achieve_a="a first 5k without stopping",
        mile="I signed up for the {town} half marathon in the autumn",
        mile_q="What race did {P} enter?", mile_a="the {town} half marathon",
        start_q="What group did {P} join?", start_a="a couch-to-5k running group",
        trait="sporty", label="running"),
    "birding": dict(
        cls="a guided walk with the {town} birding club", short="the birding",
        struggle="Everyone kept pointing at 'obvious' warblers and all I saw was leaves.",
        achieve="spotted a kingfisher on the canal all by myself",
        achieve_q="What did {P} spot on the canal?", achieve_a="a kingfisher",
        mile="we counted forty-two species at the reservoir on the big count day",
        mile_q="How many species did {P}'s group count?", mile_a="forty-two",
        start_q="What club did {P} go out with?", start_a="a birdwatching club",
        trait="outdoors", label="birdwatching"),
    "photography": dict(
        cls="a film photography workshop at {venue}", short="the film camera stuff",
        struggle="I left the lens cap on for half a roll. Half a roll!",
        achieve="got a shot of the fog over the river that I'm actually proud of",
        achieve_q="Which photo is {P} proud of?", achieve_a="fog over the river",
        mile="one of my photos is going in a group show at {venue2}",
        mile_q="Where is {P}'s photo being shown?", mile_a="in a group show at {venue2}",
        start_q="What kind of workshop did {P} attend?", start_a="a film photography workshop",
        trait="creative", label="film photography"),
    "swimming": dict(
        cls="an open-water swimming group at {lake}", short="the cold water swimming",
        struggle="The water was twelve degrees. I screamed. Loudly.",
        achieve="swam all the way out to the yellow buoy and back",
        achieve_q="How far did {P} manage to swim?", achieve_a="out to the yellow buoy and back",
        mile="I did the mile-long lake swim for the hospice and raised a bit of money",
        mile_q="What charity event did {P} take part in?", mile_a="a mile-long lake swim for the hospice",
        start_q="What group did {P} start swimming with?", start_a="an open-water swimming group",
        trait="outdoors", label="open-water swimming"),
    "chess": dict(
        cls="the Tuesday chess club at {venue}", short="chess club",
        struggle="Got checkmated in six moves by a ten-year-old.",
        achieve="won my first rated game, against a retired maths teacher",
        achieve_q="Who did {P} beat for {Pp} first win?", achieve_a="a retired maths teacher",
        mile="I played a weekend tournament and won three games out of five",
        mile_q="How did {P} do at the tournament?", mile_a="won three of five games",
        start_q="What club did {P} join on Tuesdays?", start_a="a chess club",
        trait="bookish", label="chess"),
    "knitting": dict(
        cls="a knitting circle at {venue}", short="the knitting",
        struggle="I dropped so many stitches my scarf has holes 'by design' now.",
        achieve="finished a whole hat and it fits an actual human head",
        achieve_q="What was the first thing {P} finished knitting?", achieve_a="a hat",
        mile="I knitted a blanket for my niece, took me four months",
        mile_q="What did {P} make for {Pp} niece?", mile_a="a blanket (four months of work)",
        start_q="What group did {P} start going to?", start_a="a knitting circle",
        trait="creative", label="knitting"),
    "allotment": dict(
        cls="an allotment plot at {venue} after two years on the waiting list", short="the allotment",
        struggle="Slugs ate every single lettuce in one night.",
        achieve="pulled up my first courgettes, way too many courgettes",
        achieve_q="What was the first crop {P} harvested?", achieve_a="courgettes",
        mile="my pumpkin got second prize at the allotment show",
        mile_q="What prize did {P} win?", mile_a="second prize for a pumpkin at the allotment show",
        start_q="What did {P} finally get after two years of waiting?", start_a="an allotment plot",
        trait="outdoors", label="gardening on an allotment"),
}
VENUES = ["the community centre on {street}", "a little studio in {hood}", "the rec centre",
          "the old mill building in {hood}", "a place near my office", "the arts centre downtown"]
STREETS = ["Elm Street", "Mill Road", "Harbour Street", "Victoria Road", "Oak Avenue",
           "Church Lane", "King Street", "Water Street", "Station Road", "Park Row"]
LAKES = ["the lake north of town", "the reservoir", "the quarry lake", "the lido"]

COURSES = [  # (course, exam, what it is for)
    ("an evening Spanish course", "the B1 exam", "Spanish"),
    ("a sommelier certificate", "the tasting exam", "wine"),
    ("a project management certification", "the PMP exam", "project management"),
    ("a coding bootcamp on weekends", "the final assessment", "coding"),
    ("a counselling diploma", "the practical assessment", "counselling"),
    ("a British Sign Language course", "the level two exam", "sign language"),
    ("a bookkeeping qualification", "the final exam", "bookkeeping"),
    ("a lifeguard course", "the pool test", "lifeguarding"),
]
INJURIES = [  # (how, injury, therapy, the activity again, how in the third person)
    ("slipped on ice on the way to the bus stop", "sprained my wrist", "hand therapy twice a week", "carrying groceries with both hands", "slipped on ice on the way to the bus stop"),
    ("went over on my ankle at five-a-side football", "tore a ligament in my ankle", "physio every Monday and Thursday", "playing five-a-side", "went over on {Pp} ankle at five-a-side football"),
    ("fell off my bike when a car door opened in front of me", "broke my collarbone", "physio and lots of boring exercises", "cycling to work", "fell off {Pp} bike when a car door opened in front of {Po}"),
    ("pulled something deadlifting at the gym", "hurt my lower back", "a physio who is basically a torturer", "lifting at the gym", "pulled something deadlifting at the gym"),
    ("tripped on a tree root on a trail run", "broke a toe", "rest and some taping", "trail running", "tripped on a tree root on a trail run"),
    ("fell ice skating with my cousins", "cracked a rib", "rest, mostly, and breathing exercises", "skating", "fell ice skating with {Pp} cousins"),
]
CARS = [("2014", "Honda Jazz", "silver"), ("2011", "Toyota Corolla", "dark blue"),
        ("2016", "Ford Fiesta", "red"), ("2009", "Volvo estate", "green"),
        ("2013", "VW Golf", "white"), ("2012", "Subaru Forester", "grey"),
        ("2015", "Mazda 3", "burgundy")]
BANDS = ["the Lumineers", "Fleet Foxes", "Haim", "Khruangbin", "Arctic Monkeys", "Hozier",
         "Florence and the Machine", "Bon Iver", "Paramore", "The National", "Lizzo", "Vampire Weekend"]
VENUES_MUSIC = ["the arena", "the old theatre downtown", "the outdoor amphitheatre", "the Academy"]
PRODUCTS = [("soy candles", "candles", "fig and cedar"), ("hot sauce", "sauce", "mango habanero"),
            ("silver earrings", "earrings", "little moon studs"), ("greeting cards", "cards", "the cat puns"),
            ("dog treats", "treats", "peanut butter ones"), ("tote bags", "bags", "the lemon print")]
CAUSES = [("the food bank", "food bank"), ("a literacy charity for kids", "literacy"),
          ("the children's hospital", "children's hospital"), ("the local animal rescue", "animal rescue"),
          ("a mental health helpline", "mental health"), ("the homeless shelter", "homeless shelter")]
SHOWS = ["that new detective show", "the baking competition", "the documentary about octopuses",
         "that Korean thriller everyone's on about", "the fantasy one with the dragons",
         "the cooking show with the angry chef", "the home makeover series", "that sitcom reboot"]
DISHES = ["a lasagne", "a Thai green curry", "shakshuka", "a mushroom risotto", "dumplings",
          "a chickpea stew", "fish tacos", "a lamb tagine", "pad thai", "a fish pie"]
WEATHER = {
    "winter": [("It's been grey and freezing for two weeks straight", "Same here, I've forgotten what the sun looks like"),
               ("We got snow last night! Like actual snow", "Ahh jealous, it's just slush here"),
               ("My heating bill this month is criminal", "Don't. I'm wearing two jumpers indoors")],
    "spring": [("Finally a bit of sun here, I sat outside at lunch", "Lucky! Still drizzling here"),
               ("The cherry trees on my street are all out, it's so pretty", "Ahh I love that time of year"),
               ("It's warm one day and hailing the next, I don't know how to dress", "Layers. Always layers")],
    "summer": [("It's SO hot. I'm lying on the kitchen floor", "Haha I've got a fan pointed at my face right now"),
               ("Long evenings are the best, we ate outside till ten", "Love that. It's been muggy and stormy here"),
               ("Is it just me or is this summer going by really fast", "It's flying. Where did June go")],
    "autumn": [("The leaves on my street have gone all orange, it's gorgeous", "Love autumn. Jumper weather"),
               ("It's dark by six already, I hate it", "Ugh same. Hibernation mode"),
               ("It's been so windy here, my bin ended up in the neighbour's garden", "Haha classic")],
}


def season(d, south):
    m = d.month
    s = ["winter", "winter", "spring", "spring", "spring", "summer", "summer", "summer",
         "autumn", "autumn", "autumn", "winter"][m - 1]
    if south:
        s = {"winter": "summer", "summer": "winter", "spring": "autumn", "autumn": "spring"}[s]
    return s


REACT_GOOD = ["No way!!", "Stop, that's amazing", "Yesss, love that for you", "Wow, that's huge!",
              "Omg congrats!!", "That's so exciting!", "Ahh that's brilliant", "Amazing, you deserve it"]
REACT_BAD = ["Oh no, I'm so sorry", "Ugh, that's the worst", "Noooo. Are you okay?",
             "Oof. That sounds rough.", "That's awful, poor you"]
REACT_FUN = ["Hahaha", "I'm crying 😂", "Lol classic", "That's so you", "Haha amazing"]
ASK_MORE = ["Tell me everything", "Wait, details please", "How did it go?", "And?? Go on",
            "Ooh, how was it?"]
FOLLOW = {
    "good": ["You've been wanting this for ages.", "I'm so happy for you.", "We need to celebrate properly.",
             "That's really special.", "You totally deserve it.", "Honestly made my day."],
    "bad": ["Let me know if you need anything.", "Sending you a big hug.", "That's so unfair.",
            "I hope things get easier soon.", "Look after yourself, okay?"],
    "fun": ["I can picture it perfectly.", "This is why I love talking to you.", "You need to write these stories down.",
            "Only you, honestly."],
}


def react(rng, pool):
    key = "good" if pool is REACT_GOOD else "bad" if pool is REACT_BAD else "fun"
    r = rng.choice(pool)
    if rng.random() < 0.5:
        r = r + ("" if r[-1] in ".!?" else "!") + " " + rng.choice(FOLLOW[key])
    return r


TAILS = [
    [("O", "Honestly, I love hearing about this stuff. Sounds like things are really moving for you."), ("P", "They are, slowly. It helps having someone to tell.")],
    [("O", "You always throw yourself into things, I really admire that."), ("P", "Ha, or I just can't sit still.")],
    [("P", "Sorry, I've been talking about myself for ages. How are you?"), ("O", "Don't be silly, I love it. I'm good! Nothing that exciting going on here.")],
    [("O", "Keep me posted, okay?"), ("P", "Always. You'll be the first to know.")],
    [("O", "That's such a you thing to do haha."), ("P", "I know. I'm nothing if not predictable.")],
    [("P", "It's been a lot, but in a good way I think."), ("O", "That's the best kind of a lot.")],
    [("O", "I'm so glad you told me. It's nice to hear some good news for once."), ("P", "Right? The world could use more of it.")],
    [("P", "Anyway, that's my big update."), ("O", "Big update indeed! I'll need a proper catch-up over coffee.")],
    [("O", "How are you feeling about it all?"), ("P", "Mostly excited. A tiny bit terrified. Normal mix.")],
    [("O", "You know you can always call me, right?"), ("P", "I know. Thank you, really.")],
    [("P", "I keep thinking about how different things were a year ago."), ("O", "It's wild how much can change in a year.")],
    [("O", "This is why I love our chats. Never a dull moment with you."), ("P", "Ha! I try.")],
    [("P", "I'll send you photos later."), ("O", "You'd better!")],
    [("O", "Your mum must be thrilled."), ("P", "She's already told half the street, knowing her.")],
    [("P", "Part of me still can't believe it."), ("O", "Believe it! You made it happen.")],
    [("O", "Life's been throwing a lot at you lately, huh."), ("P", "Just a bit. I'm rolling with it.")],
]
ASIDES = [  # what people add to a turn without saying anything new
    "Honestly, it's been a week.", "I'm still processing it, to be honest.", "Life, eh.",
    "I don't know why I'm telling you this, but there you go.", "It's the little things.",
    "Anyway, that's where I'm at.", "I keep thinking about it.", "Not what I expected, but here we are.",
    "It's been one of those months.", "I've been meaning to tell you for ages.", "You know how it is.",
    "Ha, you know me.", "I'll tell you the full story when we see each other.", "Time is flying, seriously.",
    "My brain is mush today, sorry if I'm not making sense.",
    "It feels like ages since we properly talked.", "I was thinking about you earlier, actually.",
    "I need more hours in the day.", "So that's been my week.",
    "It's all go round here.", "Such a strange few days.", "Every day's an adventure.",
    "I'll send you a photo later.", "No regrets.", "Still can't quite believe it.",
    "Which, to be fair, I should have seen coming.", "Weirdly proud of that.",
]
ADDRESS = ["Wow, {o}! ", "Aww, {o}. ", "Oh {o}, ", "{o}! ", "Ha, {o}. "]
TRANSITIONS = ["Anyway!", "Other news!", "Oh, also!", "Changing the subject completely.", "Okay, random one.",
               "Anyway, enough about that.", "Oh! Before I forget."]
BRIDGES = ["Haha", "Right?", "Ha, yeah", "Oh?", "Mm", "True", "Lol", "Yeah", "Ha, fair"]


# ---------------------------------------------------------------------------------------------

class Person:
    def __init__(self, name, g):
        self.name, self.g = name, g

    def slots(self, k):
        she, her, his = ("she", "her", "her") if self.g == "f" else ("he", "him", "his")
        return {k: self.name, k + "s": she, k + "o": her, k + "p": his,
                k + "S": cap(she), k + "P": cap(his)}


def pron(g, k):
    she, her, his = ("she", "her", "her") if g == "f" else ("he", "him", "his")
    return {k + "s": she, k + "o": her, k + "p": his, k + "S": cap(she), k + "P": cap(his)}


class Conv:
    def __init__(self, rng, cid, a, b):
        self.rng, self.cid, self.people = rng, cid, [a, b]
        n = rng.randint(20, 30)
        start = dt.datetime(2022, 1, 3) + dt.timedelta(days=rng.randint(0, 520))
        dates, d = [], start
        for i in range(n):
            if i:
                d += dt.timedelta(days=rng.choice([3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 19, 23]))
            dates.append(d.replace(hour=rng.randint(8, 22), minute=rng.randint(0, 59)))
        self.dates = dates
        self.n = n
        self.blocks = [[] for _ in range(n)]   # per session: blocks of (speaker, text, tag)
        self.load = [0] * n
        self.questions = []
        self.traits = {a.name: [], b.name: []}
        self.tagn = 0
        self.used = set()
        self.sl = 0
        self.fill_use = {}

    def day(self, s):
        return self.dates[s].date()

    def tag(self):
        self.tagn += 1
        return f"t{self.tagn}"

    def uniq(self, pool, key=None):
        """A pool item not used in this conversation yet."""
        items = [x for x in pool if (key or (lambda v: v))(x) not in self.used]
        x = self.rng.choice(items or pool)
        self.used.add((key or (lambda v: v))(x))
        return x

    def pick(self, k, lo=0, hi=None, gap=1):
        """k increasing session indices in [lo, hi], at least gap apart, on lightly used sessions."""
        hi = self.n - 1 if hi is None else min(hi, self.n - 1)
        best = None
        for _ in range(60):
            idx = sorted(self.rng.sample(range(lo, hi + 1), k)) if hi - lo + 1 >= k else None
            if idx is None:
                raise Retry()
            if any(b - a < gap for a, b in zip(idx, idx[1:])):
                continue
            cost = sum(self.load[i] ** 2 for i in idx) + self.rng.random()
            if best is None or cost < best[0]:
                best = (cost, idx)
        if best is None:
            raise Retry()
        return best[1]

    def add(self, s, lines, d, who, tail=True):
        """lines: (role, template, tag); role is 'P' or 'O'; who maps roles to names. Some
        exchanges get two more turns of chatter that say nothing new."""
        block = []
        for role, text, tag in lines:
            block.append((who[role], fill(text, d), tag))
        if tail and len(lines) >= 3 and self.rng.random() < 0.45:
            i = min(range(len(TAILS)), key=lambda k: (self.fill_use.get(("tail", k), 0), self.rng.random()))
            self.fill_use[("tail", i)] = self.fill_use.get(("tail", i), 0) + 1
            block.extend((who[r], fill(t, d), None) for r, t in TAILS[i])
        self.blocks[s].append(block)
        self.load[s] += 1

    def checkin(self, lo, hi, lines, d, who, p=0.75):
        """A follow-up exchange with no new fact, in a session strictly between lo and hi."""
        cands = [i for i in range(lo + 1, hi) if i < self.n]
        if cands and self.rng.random() < p:
            self.add(self.rng.choice(cands), lines, d, who)

    def q(self, kind, text, ev, answer, d, **extra):
        q = {"kind": kind, "question": fill(text, d), "evidence": list(ev),
             "answer": fill(answer, d), "sl": self.sl}
        q.update(extra)
        self.questions.append(q)

    def trait(self, who, trait, tags, reason):
        self.traits[who].append((trait, list(tags), reason))


class Retry(Exception):
    pass


def base_slots(cv, P, O):
    d = {}
    d.update(P.slots("P"))
    d.update(O.slots("O"))
    d["city"] = P.city
    d["town"] = P.town
    d["hood"] = P.hood
    d["street"] = P.street
    return d


def ch(rng, xs):
    return rng.choice(xs)


# ---------------------------------------------------------------------------------------------
# Storylines. Each writes its turns into sessions and its questions.

def sl_pet(cv, P, O):
    rng = cv.rng
    kind = "cat" if rng.random() < 0.3 else "dog"
    breed = cv.uniq(CATS if kind == "cat" else DOGS)
    pname = cv.uniq(PET_NAMES)
    g = rng.choice("fm")
    d = base_slots(cv, P, O)
    d.update(pron(g, "q"))
    d.update(kind=kind, breed=breed, abreed=article(breed), Abreed=cap(article(breed)), pn=pname, age=ch(rng, ["two", "three", "four", "about five", "barely one"]),
             shelter=fill(ch(rng, SHELTERS), d), obj=ch(rng, SWALLOWED[kind]),
             cost=ch(rng, ["340", "480", "650", "890", "1,200"]))
    tr, trick = ch(rng, TRAINING[kind])
    d.update(training=tr, trick=trick, wd=ch(rng, WDAYS[:5]))
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r1 = rel_past(rng, cv.day(s1))
    r2 = rel_past(rng, cv.day(s2), after=cv.day(s1))
    d["r1"], d["r2"] = r1.phrase, r2.phrase
    who = {"P": P.name, "O": O.name}
    t_go, t_breed, t_name = cv.tag(), cv.tag(), cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["Okay so, big news. We went to {shelter} {r1} \"just to look\"",
                       "So {r1} I did something slightly impulsive. I stopped by {shelter} after work",
                       "Confession: I went to {shelter} {r1}. Just to look. Obviously"]), t_go),
        ("O", ch(rng, ["Oh no. I know exactly where this is going haha",
                       "Uh oh... did you come home with someone?",
                       "'Just to look'. Sure, {P}."]), None),
        ("P", ch(rng, ["Guilty! {qS}'s {abreed}, {age} years old, and {qs} already owns the sofa.",
                       "Yep. {Abreed}. {age} years old, very shy at first but {qs}'s warming up.",
                       "Of course. {Abreed}, {age}, with the saddest eyes you've ever seen."]), t_breed),
        ("O", ch(rng, ["Stop, I need pictures immediately. Name??",
                       "That's the best news. What's {qo} called?",
                       "Omg. What did you call {qo}?"]), None),
        ("P", ch(rng, ["{pn}! The shelter had another name for {qo} but {pn} just suits {qo}.",
                       "We went with {pn}. I wanted something food related, obviously.",
                       "{pn}. It was the only name {qs} reacted to, so that settled it."]), t_name),
        ("O", ch(rng, ["{pn}!! I love it. Can't wait to meet {qo}.", "Perfect name honestly."]), None),
    ], d, who)
    t_vet, t_cost = cv.tag(), cv.tag()
    cv.add(s2, [
        ("P", ch(rng, ["Ugh, what a week. {pn} ate {obj} {r2} and we ended up at the emergency vet at midnight.",
                       "So remember how I said {pn} eats everything? {r2c}, {qs} actually swallowed {obj}."]), t_vet),
        ("O", ch(rng, ["Oh no!! Is {qs} okay?", "Noooo. Poor {pn}, is {qs} alright?"]), None),
        ("P", ch(rng, ["{qS}'s totally fine, back to being a menace. My bank account is not. {cost} dollars.",
                       "Fine now, thank god. The bill was {cost} though, I almost fainted at the desk."]), t_cost),
        ("O", ch(rng, ["Yikes. Worth it though.", "That's so stressful, I'm glad {qs}'s okay."]), None),
    ], {**d, "r2c": cap(r2.phrase)}, who)
    t_cls, t_trick = cv.tag(), cv.tag()
    cv.add(s3, [
        ("O", ch(rng, ["How's little {pn} doing?", "Wait, how's {pn}? I need an update."]), None),
        ("P", ch(rng, ["So good! We started {training} on {wd} evenings and {qs}'s the teacher's favourite.",
                       "Honestly thriving. We've been doing {training} every {wd}, it's the highlight of my week."]), t_cls),
        ("O", ch(rng, ["Haha of course {qs} is.", "That's adorable."]), None),
        ("P", ch(rng, ["{qS} learned to {trick} and I nearly cried.",
                       "And now {qs} can {trick}. I'm unbearably proud."]), t_trick),
    ], d, who)
    # a distractor: someone else's animal, in another session
    sx = ch(rng, [i for i in range(cv.n) if i not in (s1, s2, s3)])
    cv.add(sx, [
        ("O", ch(rng, ["My neighbour's {kind} got into our bins again, there's rubbish all over the path.",
                       "My cousin's {kind} swallowed a battery once, worst night of her life.",
                       "I saw a {kind} at the park today that looked exactly like a little bear."]), None),
        ("P", ch(rng, ["Haha oh no", "Yikes", "Aww"]), None),
    ], d, who)
    cv.checkin(s1, s2, [("O", ch(rng, ["How's {pn} settling in?", "Is {pn} settling in okay?"]), None),
                        ("P", ch(rng, ["Great! {qS} follows me from room to room and sleeps on my feet.",
                                       "So well. {qS} has already figured out where the treats live."]), None)], d, who)
    cv.checkin(s3, cv.n, [("O", "Give {pn} a scratch behind the ears from me.", None),
                          ("P", "Will do, {qs}'s snoring next to me right now.", None)], d, who)
    cv.q("single-hop", ch(rng, ["What kind of {kind} did {P} adopt?", "What breed is {P}'s {kind}?"]),
         [t_breed], "{abreed}", d)
    cv.q("single-hop", "What did {P} name {Pp} new {kind}?", [t_name], "{pn}", d)
    cv.q("single-hop", ch(rng, ["What did {pn} swallow?", "Why did {P} have to rush {pn} to the vet?"]),
         [t_vet], "{obj}", d)
    cv.q("single-hop", "How much did the emergency vet visit cost {P}?", [t_cost], "{cost} dollars", d)
    cv.q("single-hop", "What can {pn} do now?", [t_trick], "{trick}", d)
    cv.q("temporal", "When did {P} adopt {pn}?", [t_go], r1.answer, d, date=r1.date.isoformat(), date_precision=r1.prec)
    cv.q("temporal", "When did {pn} end up at the emergency vet?", [t_vet], r2.answer, d,
         date=r2.date.isoformat(), date_precision=r2.prec)
    cv.q("multi-hop", "Where did {P} get {Pp} {kind}, and what classes does {pn} go to?", [t_go, t_cls],
         "{shelter}; {training}", d)
    cv.q("multi-hop", "What breed is {pn}, and what did {qs} eat that landed {qo} at the vet?", [t_breed, t_vet],
         "{abreed}; {obj}", d)
    cv.q("adversarial", "What kind of {kind} did {O} adopt?", [t_breed],
         "Not mentioned for {O}; {P} adopted {abreed}", d, subtype="wrong-speaker")
    cv.q("adversarial", "What did {O}'s {kind} swallow?", [t_vet],
         "Not mentioned for {O}; {P}'s {kind} {pn} swallowed {obj}", d, subtype="wrong-speaker")
    cv.trait(P.name, "animals", [t_breed, t_cls], "{P} adopted {abreed} and takes {pn} to {training}".format(**{k: d[k] for k in ("P", "abreed", "pn", "training")}))


def sl_job(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    role, place, task = P.role
    c2 = cv.uniq([c for c in WORKPLACES[role] if c != P.company])
    boss = cv.uniq(OTHER_NAMES)
    lead = cv.uniq(OTHER_NAMES)
    griev, griev_a = ch(rng, GRIEVANCES)
    d.update(role=role, place=place, task=task, c1=P.company, c2=c2, boss=boss, lead=lead,
             food=ch(rng, FOODS_BROUGHT), role2=ch(rng, ["senior " + role, "lead " + role, role + " team lead"]))
    d["Role2"] = cap(d["role2"])
    d["griev"] = fill(griev, d)
    d["griev_a"] = fill(griev_a, d)
    accept = rng.random() < 0.7
    s0, s1, s2, s3 = cv.pick(4, 0, cv.n - 1, gap=2)
    who = {"P": P.name, "O": O.name}
    r1 = rel_past(rng, cv.day(s1))
    d["r1"] = r1.phrase
    t_job, t_grv = cv.tag(), cv.tag()
    cv.add(s0, [
        ("O", ch(rng, ["How's work treating you?", "How are things at work these days?"]), None),
        ("P", ch(rng, ["Work is... work. Things at {c1} are a mess, I'm the only {role} left on my team.",
                       "Honestly? Tired. Being a {role} at {c1} was fun for the first year.",
                       "Meh. {c1} is fine, I guess. I've been the {role} there for four years now."]), t_job),
        ("O", ch(rng, ["That sounds exhausting. What's going on?", "Uh oh. What's the issue?"]), None),
        ("P", ch(rng, ["Mostly that {griev}.", "Long story, but basically {griev}."]), t_grv),
        ("O", ch(rng, ["Ugh. You deserve better than that.", "That would drive me up the wall."]), None),
    ], d, who)
    t_int, t_task = cv.tag(), cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["Don't tell anyone yet, but I had an interview {r1}. At {c2}!",
                       "Okay, secret news: I went for an interview at {c2} {r1}."]), t_int),
        ("O", ch(rng, ["WHAT. For what?", "Ooh! What's the job?"]), None),
        ("P", "{Role2}. Proper step up. They had me do {task}, I was sweating through my shirt.", t_task),
        ("O", ch(rng, ["You'll smash it, I know you will.", "Fingers crossed for you!!"]), None),
    ], d, who)
    cv.checkin(s1, s2, [("O", "Any news from the interview yet?", None),
                        ("P", "Nothing. They said two weeks and it's been ten days. I check my email every five minutes.", None),
                        ("O", "The waiting is the worst part. Fingers crossed!", None)], d, who)
    t_off, t_not = cv.tag(), cv.tag()
    if accept:
        r2 = rel_future(rng, cv.day(s2), kinds=["weekday", "next_week", "in_weeks", "nth", "nth"])
        d["r2"] = r2.phrase
        cv.add(s2, [
            ("P", ch(rng, ["So... remember the thing I told you not to tell anyone?",
                           "Update on the you-know-what!"]), None),
            ("O", ch(rng, ["The interview?? Did you hear back?", "Omg yes, tell me!"]), None),
            ("P", ch(rng, ["They offered it to me! I start {r2}.", "I got it!! First day is {r2}."]), t_off),
            ("O", react(rng, REACT_GOOD) + " Did you tell {boss} yet?", None),
            ("P", ch(rng, ["Handed my notice in this morning. {boss} just said 'ok'. Very on brand.",
                           "Yep, {boss} looked like I'd cancelled Christmas, it was weirdly satisfying."]), t_not),
        ], d, who)
        t_new, t_lead = cv.tag(), cv.tag()
        cv.add(s3, [
            ("O", "How's the new job going?", None),
            ("P", ch(rng, ["I actually get a lunch break now, which is wild. Everyone's so calm.",
                           "So different. Nobody emails after six, I didn't know that was allowed."]), t_new),
            ("O", "And the people?", None),
            ("P", ch(rng, ["Lovely. My team lead, {lead}, brought in {food} on my first day.",
                           "Really nice. {lead}, who runs the team, turned up with {food} for my first day."]), t_lead),
        ], d, who)
        cv.q("temporal", "When did {P} start the new job at {c2}?", [t_off], r2.answer, d,
             date=r2.date.isoformat(), date_precision=r2.prec)
        cv.q("single-hop", "Who brought food on {P}'s first day, and what was it?", [t_lead], "{lead}, {food}", d)
        cv.q("multi-hop", "Where does {P} work now, and who leads {Pp} team?", [t_int, t_lead], "{c2}; {lead}", d)
        cv.q("multi-hop", "Which two employers has {P} had, and what was {Pp} role at the first one?",
             [t_job, t_int], "{c1} ({role}), then {c2}", d)
        cv.q("open-domain", "Would {P} be likely to go back to {c1} if {boss} asked?", [t_grv, t_new],
             "Probably not: {griev_a} at {c1}, and {Ps} is happier at {c2}", d)
        cv.q("adversarial", "Who brought food on {O}'s first day at {c2}?", [t_lead],
             "{O} didn't start at {c2}; {P} did, and {lead} brought {food}", d, subtype="wrong-speaker")
    else:
        cv.add(s2, [
            ("O", ch(rng, ["Did you ever hear back from {c2}?", "Any news from the interview?"]), None),
            ("P", ch(rng, ["They offered it! But the pay was lower than what I'm on now, so I said no.",
                           "Yeah, they made an offer, but it was less money and a longer commute. I turned it down."]), t_off),
            ("O", "Oof, brave. No regrets?", None),
            ("P", ch(rng, ["Plot twist: I told {boss} about it and {c1} gave me a raise to stay.",
                           "Nope, because {c1} found out and bumped my salary. So I'm staying put."]), t_not),
        ], d, who)
        cv.q("single-hop", "Why did {P} say no to {c2}?", [t_off], "the pay was lower (and the commute longer)", d)
        cv.q("multi-hop", "Did {P} end up leaving {c1}, and why?", [t_off, t_not],
             "No: {Ps} turned down {c2}'s lower offer and {c1} gave {Po} a raise", d)
        cv.q("adversarial", "Why did {O} turn down the job at {c2}?", [t_off],
             "{O} didn't; {P} turned {c2} down because the pay was lower", d, subtype="wrong-speaker")
    cv.q("single-hop", "What company did {P} work for at the start?", [t_job], "{c1}", d)
    cv.q("single-hop", ch(rng, ["Why was {P} unhappy at work?", "What was bothering {P} about {Pp} job?"]),
         [t_grv], "{griev_a}", d)
    cv.q("single-hop", "What did {P} have to do in {Pp} interview?", [t_task], "{task}", d)
    cv.q("temporal", "When did {P} interview at {c2}?", [t_int], r1.answer, d,
         date=r1.date.isoformat(), date_precision=r1.prec)
    cv.q("adversarial", "What was {O} asked to do in the interview at {c2}?", [t_task],
         "{O} didn't interview there; {P} did {task}", d, subtype="wrong-speaker")
    sx = ch(rng, [i for i in range(cv.n) if i not in (s0, s1, s2, s3)])
    cv.add(sx, [
        ("O", ch(rng, ["A guy on my team just quit with no notice, total chaos at work.",
                       "My sister has an interview on Friday, she's been practising on me all week.",
                       "We had a fire drill at work today and half the office just kept typing."]), None),
        ("P", ch(rng, ["Yikes", "Haha oh dear", "Ugh, offices"]), None),
    ], d, who)


def sl_trip(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    dest, food, act, report = cv.uniq(DESTS, key=lambda x: x[0])
    comp_g = rng.choice("fm")
    comp_name, comp_g = (P.partner, P.partner_g) if P.partner else (cv.uniq(OTHER_F if comp_g == "f" else OTHER_M), comp_g)
    d.update(dest=dest, food=food, act=act, report=report, comp=comp_name)
    d.update(pron(comp_g, "c"))
    s_a = cv.pick(1, 0, cv.n // 2)[0]
    da = cv.day(s_a)
    m1 = (da + dt.timedelta(days=rng.randint(40, 75))).replace(day=1)
    m2 = (m1 + dt.timedelta(days=rng.choice([31, 62, 93]))).replace(day=1)
    start = m2 + dt.timedelta(days=rng.randint(0, 18))
    end = start + dt.timedelta(days=rng.randint(5, 10))
    mids = [i for i in range(s_a + 1, cv.n) if cv.day(i) < m1]
    after = [i for i in range(cv.n) if cv.day(i) > end]
    if not mids or not after:
        raise Retry()
    s_b = rng.choice(mids)
    s_c = after[0] if rng.random() < 0.7 or len(after) == 1 else after[1]
    reason, reason_a = ch(rng, TRIP_REASONS)
    mishap, mishap_a = ch(rng, TRIP_MISHAPS)
    d.update(m1=MONTHS[m1.month - 1], m2=MONTHS[m2.month - 1])
    d["reason"] = fill(reason, d)
    d["reason_a"] = fill(reason_a, d)
    d["mishap"] = fill(mishap, d)
    d["mishap_a"] = fill(mishap_a, d)
    back = back_phrase(cv.day(s_c), end)
    d["back"] = back.phrase
    who = {"P": P.name, "O": O.name}
    t_plan, t_why = cv.tag(), cv.tag()
    cv.add(s_a, [
        ("P", ch(rng, ["{comp} and I finally booked something! {dest} in {m1}.",
                       "Guess who finally booked a holiday. Us! {dest}, {m1}."]), t_plan),
        ("O", ch(rng, ["Jealous!! What's the plan there?", "Ahh I've always wanted to go. What are you going to do?"]), None),
        ("P", ch(rng, ["Mostly eat, honestly. And {comp} wants to {act}.",
                       "No real plan. {comp} has a list though, {cs} wants to {act}."]), t_why),
    ], d, who)
    t_chg = cv.tag()
    change_to = fill("{m2}", d)
    cv.add(s_b, [
        ("P", ch(rng, ["Small plot twist on the holiday front.", "So, the trip. Slight change of plan."]), None),
        ("O", ch(rng, ["Uh oh, what happened?", "Oh no, don't tell me it's off"]), None),
        ("P", ch(rng, ["Not off, just later. {reasonc}, so we pushed it to {m2}.",
                       "{reasonc}. We moved everything to {m2} instead."]), t_chg),
        ("O", ch(rng, ["Annoying, but at least it's still happening.", "Ugh. Well, more time to plan!"]), None),
    ], {**d, "reasonc": cap(d["reason"])}, who)
    t_back, t_food, t_mis = cv.tag(), cv.tag(), cv.tag()
    lines = [
        ("P", ch(rng, ["We're back! Got home {back}.", "Back home as of {back}, still unpacking."]), t_back),
        ("O", ch(rng, ["Welcome back!! How was it?", "Finally! Tell me everything"]), None),
        ("P", ch(rng, ["Honestly amazing. The {food} alone was worth the flight, I had it every day.",
                       "So good. I ate my body weight in {food}."]), t_food),
        ("O", "Best bit?", None),
        ("P", cap(report) + ".", None),
        ("O", react(rng, REACT_GOOD), None),
        ("P", ch(rng, ["Only drama was that {mishap}.", "Although {mishap}, so that was fun."]), t_mis),
    ]
    t_rep = cv.tag()
    lines[4] = ("P", cap(report) + ".", t_rep)
    cv.add(s_c, lines, d, who)
    # distractor
    sx = ch(rng, [i for i in range(cv.n) if i not in (s_a, s_b, s_c)])
    cv.add(sx, [
        ("O", ch(rng, ["We should really do a weekend away together at some point.",
                       "My cousin just got back from {dest2} and her photos are unreal.",
                       "Have you ever been somewhere where it rained the whole holiday? My parents are in {dest2} and it hasn't stopped."]), None),
        ("P", ch(rng, ["Yes! Let's actually plan it this time.", "Ooh, I'd love to go there someday.", "Haha that's rough"]), None),
    ], {**d, "dest2": ch(rng, [x[0] for x in DESTS if x[0] != dest])}, who)
    cv.checkin(s_a, s_b, [("O", "Are you excited for your holiday?", None),
                          ("P", "So excited. I've already made a spreadsheet of places to eat.", None)], d, who)
    cv.checkin(s_b, s_c, [("O", "Is the holiday still on for the new dates?", None),
                          ("P", "Still on! Fingers crossed nothing else goes wrong.", None)], d, who, p=0.5)
    cv.q("single-hop", "Where were {P} and {comp} originally going in {m1}?", [t_plan], "{dest}", d)
    cv.q("single-hop", ch(rng, ["Why did {P}'s holiday get pushed back?", "What made {P} postpone the trip?"]),
         [t_chg], "{reason_a}", d)
    cv.q("single-hop", "Which dish did {P} keep eating on holiday?", [t_food], "{food}", d)
    cv.q("single-hop", "What went wrong on {P}'s trip?", [t_mis], "{mishap_a}", d)
    cv.q("temporal", "When did {P} and {comp} actually go to {dest}?", [t_chg, t_back],
         mstr(m2), d, date=start.isoformat()[:7], date_precision="month")
    cv.q("multi-hop", "Who did {P} travel with, and what was the highlight of the trip?", [t_plan, t_rep],
         "{comp}; " + report, d)
    cv.q("multi-hop", "How much later than first planned did {P}'s holiday happen, and why?", [t_plan, t_chg],
         "{m2} instead of {m1}, because {reason_a}", d)
    cv.q("adversarial", "Why did {O} postpone {Op} trip to {dest}?", [t_chg],
         "{O} had no such trip; {P}'s trip was postponed because {reason_a}", d, subtype="wrong-speaker")
    cv.q("adversarial", "What did {O} eat every day in {dest}?", [t_food],
         "{O} didn't go; {P} ate {food}", d, subtype="wrong-speaker")
    cv.q("adversarial", "What did {P} say about the hotel in {dest}?", [t_back, t_rep],
         "Nothing about a hotel was said", d, subtype="never-said")
    cv.trait(P.name, "foodie", [t_why, t_food], "{P} travelled to {dest} mostly to eat and ate {food} every day".format(**d))


def sl_hobby(cv, P, O):
    rng = cv.rng
    key = cv.uniq(sorted(HOBBIES))
    h = HOBBIES[key]
    d = base_slots(cv, P, O)
    d.update(friend=cv.uniq(OTHER_NAMES), lake=ch(rng, LAKES), venue2=ch(rng, ["the Crown", "Blue Door Café", "the Lantern", "the library gallery"]))
    d["venue"] = fill(ch(rng, VENUES), d)
    d["cls"] = fill(h["cls"], d)
    d["short"] = h["short"]
    d["label"] = h["label"]
    for k in ("struggle", "achieve", "mile", "achieve_q", "achieve_a", "mile_q", "mile_a", "start_q", "start_a"):
        d[k] = fill(h[k], d)
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r1 = rel_past(rng, cv.day(s1))
    d["r1"] = r1.phrase
    who = {"P": P.name, "O": O.name}
    t_start, t_str = cv.tag(), cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["I finally did the thing I keep talking about. Went to {cls} {r1}.",
                       "So {r1} I went to {cls}. Finally."]), t_start),
        ("O", ch(rng, ASK_MORE), None),
        ("P", ch(rng, ["Humbling. {struggle}", "Ha. Well. {struggle}"]), t_str),
        ("O", ch(rng, ["Haha everyone starts somewhere!", "Lol. You'll get there."]), None),
    ], d, who)
    t_ach = cv.tag()
    cv.add(s2, [
        ("P", ch(rng, ["Remember {short}? I actually {achieve}!", "Small brag incoming: I {achieve}."]), t_ach),
        ("O", ch(rng, ["Pics or it didn't happen", "Look at you go!!", "See, I told you!"]), None),
        ("P", ch(rng, ["Haha sending you one now.", "I'll show you next time, I'm so proud."]), None),
    ], d, who)
    t_mile = cv.tag()
    cv.add(s3, [
        ("O", ch(rng, ["Are you still doing {short}?", "How's {short} going, by the way?"]), None),
        ("P", ch(rng, ["More than ever. Actually, {mile}!", "Oh yes. Big news actually: {mile}."]), t_mile),
        ("O", react(rng, REACT_GOOD), None),
    ], d, who)
    cv.checkin(s1, s2, [("O", "Did you go back to {short} this week?", None),
                        ("P", "I did! Still terrible, still loving it.", None)], d, who)
    cv.q("single-hop", "{start_q}", [t_start], "{start_a}", d)
    cv.q("single-hop", "{achieve_q}", [t_ach], "{achieve_a}", d)
    cv.q("single-hop", "{mile_q}", [t_mile], "{mile_a}", d)
    cv.q("temporal", "When did {P} first try {label}?", [t_start], r1.answer, d,
         date=r1.date.isoformat(), date_precision=r1.prec)
    cv.q("multi-hop", "How has {P}'s {label} gone since the first session?", [t_str, t_ach, t_mile],
         "rough start ({struggle}) then {achieve_a}, and later {mile_a}", d)
    cv.q("adversarial", fill(h["achieve_q"], {**d, **O.slots("P")}), [t_ach],
         "Not {O}; {P}: {achieve_a}", d, subtype="wrong-speaker")
    cv.trait(P.name, h["trait"], [t_start, t_ach, t_mile], "{P} took up {label}".format(**d))


def sl_wedding(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    sib = P.sibling
    fi = cv.uniq(OTHER_NAMES)
    d.update(sib=sib, rel=P.sib_rel, fi=fi, role_=ch(rng, ["give a speech", "be the officiant", "do the readings", "walk {sibo} down the aisle"]),
             venue=ch(rng, ["a barn", "a vineyard", "an old lighthouse", "a castle hotel", "a boathouse"]),
             wtown=ch(rng, [c[3] for c in CITIES]),
             inc=ch(rng, [("the DJ played the wrong song for the first dance", "the DJ played the wrong first-dance song"),
                          ("a goat walked into the ceremony. A real goat", "a goat wandered into the ceremony"),
                          ("the cake collapsed an hour before dinner", "the cake collapsed"),
                          ("the groom's trousers split on the dance floor", "trousers split on the dance floor")]))
    d.update(pron(P.sib_g, "sib"))
    d["role_"] = fill(d["role_"], d)
    d["inc_t"], d["inc_a"] = d["inc"]
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=3)
    r1 = rel_past(rng, cv.day(s1))
    wd = cv.day(s3) - dt.timedelta(days=rng.randint(2, 9))
    if wd <= cv.day(s2):
        raise Retry()
    d["r1"] = r1.phrase
    # the date as said in s2, absolute
    d["wdate"] = f"{WDAYS[wd.weekday()]} the {ordinal(wd.day)} of {MONTHS[wd.month - 1]}"
    who = {"P": P.name, "O": O.name}
    t_eng, t_fi = cv.tag(), cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["My little {rel} {sib} got engaged {r1}!!", "Family news: {sib} proposed {r1}! Or got proposed to, I'm still unclear."]), t_eng),
        ("O", ch(rng, ["Aww congrats to them! Who's the lucky one?", "Stop!! To who?"]), None),
        ("P", ch(rng, ["{fi}. They've been together since uni and I introduced them, so I'm taking full credit.",
                       "{fi}, who I set {sibo} up with years ago. You're welcome, world."]), t_fi),
        ("O", react(rng, REACT_FUN), None),
    ], d, who)
    t_role, t_date = cv.tag(), cv.tag()
    cv.add(s2, [
        ("P", ch(rng, ["Wedding stuff is eating my life. {sib} asked me to {role_}.", "So {sib} wants me to {role_} at the wedding. No pressure."]), t_role),
        ("O", ch(rng, ["That's huge, {P}. When's the big day?", "Omg. When is it again?"]), None),
        ("P", "{wdate}, at {venue} just outside {wtown}.", t_date),
        ("O", "You're going to be great.", None),
    ], d, who)
    t_inc = cv.tag()
    cv.add(s3, [
        ("P", ch(rng, ["Survived the wedding!", "Well, {sib} is officially married."]), None),
        ("O", ch(rng, ["How was it??", "Aww! How did it all go?"]), None),
        ("P", ch(rng, ["Gorgeous. Except {inc_t}.", "So lovely. Well, apart from when {inc_t}."]), t_inc),
        ("O", react(rng, REACT_FUN), None),
    ], d, who)
    cv.checkin(s2, s3, [("P", "I've written three drafts of my bit for the wedding and binned all three.", None),
                        ("O", "You'll get there. Just speak from the heart, they'll love it.", None)], d, who)
    cv.q("single-hop", "Who is {P}'s {rel} marrying?", [t_fi], "{fi}", d)
    cv.q("single-hop", "What was {P} asked to do at the wedding?", [t_role], "{role_}", d)
    cv.q("single-hop", "Where was {sib}'s wedding held?", [t_date], "at {venue} outside {wtown}", d)
    cv.q("single-hop", "What went wrong at {sib}'s wedding?", [t_inc], "{inc_a}", d)
    cv.q("temporal", "When did {sib} get engaged?", [t_eng], r1.answer, d, date=r1.date.isoformat(), date_precision=r1.prec)
    cv.q("temporal", "When was {sib}'s wedding?", [t_date], dstr(wd), d, date=wd.isoformat(), date_precision="day")
    cv.q("multi-hop", "How did {P} help {sib} and {fi} get together, and what part did {Ps} play at their wedding?",
         [t_fi, t_role], "{Ps} introduced them; {Ps} was asked to {role_}", d)
    cv.q("adversarial", "What happened at {O}'s {rel}'s wedding?", [t_inc],
         "Not {O}'s {rel}; at {P}'s {rel} {sib}'s wedding {inc_a}", d, subtype="wrong-speaker")
    cv.q("adversarial", "Who did {P}'s {rel} break up with?", [t_eng, t_fi],
         "Nobody; {sib} got engaged to {fi}", d, subtype="never-said")
    cv.trait(P.name, "family", [t_fi, t_role], "{P} set up {Pp} {rel} and was asked to {role_} at the wedding".format(**d))


def sl_move(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    newhood = ch(rng, [h for h in P.hoods if h != P.hood])
    feat, feat_a, trait = ch(rng, [("a tiny garden out the back", "a garden", "outdoors"),
                                    ("a balcony big enough for a table", "a balcony", None),
                                    ("a second bedroom I can turn into a studio", "a spare room for a studio", "creative"),
                                    ("a proper kitchen with a gas hob", "a proper kitchen", "foodie")])
    issue, issue_a = ch(rng, [("the boiler packed in on day three, cold showers all week", "the boiler broke"),
                              ("there's mould behind the wardrobe, which the viewing somehow didn't show", "mould behind the wardrobe"),
                              ("the guy upstairs plays the drums. At 7am. On Sundays", "a neighbour drumming early in the morning"),
                              ("the kitchen ceiling started leaking when it rained", "a leaking ceiling")])
    d.update(newhood=newhood, feat=feat, feat_a=feat_a, issue=issue, issue_a=issue_a, n=ch(rng, ["six", "seven", "nine", "eleven"]))
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r2 = rel_future(rng, cv.day(s2), kinds=["weekday", "next_week", "nth", "in_weeks"])
    if s3 < cv.n and cv.day(s3) <= r2.date:
        later = [i for i in range(s2 + 1, cv.n) if cv.day(i) > r2.date]
        if not later:
            raise Retry()
        s3 = later[0]
    d["r2"] = r2.phrase
    who = {"P": P.name, "O": O.name}
    t_hunt = cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["Flat hunting is soul-destroying. We've seen {n} places and one had the shower in the kitchen.",
                       "We're looking for a new place, our lease is up. It's grim out there."]), t_hunt),
        ("O", ch(rng, ["The shower in the kitchen?? Where are you looking?", "Ugh, I remember. Where are you looking?"]), None),
        ("P", "Anywhere that isn't here, honestly. Our landlord has decided rent should go up by a third.", None),
    ], d, who)
    t_got, t_date = cv.tag(), cv.tag()
    cv.add(s2, [
        ("P", ch(rng, ["We got a place!! In {newhood}. It has {feat}.", "Signed the lease on a flat in {newhood} today! {featc}, can you believe it."]), t_got),
        ("O", ch(rng, ["Yesss! When's the move?", "Finally! When do you get the keys?"]), None),
        ("P", ch(rng, ["Moving {r2}. Currently drowning in boxes.", "{r2c}. Send help and tape."]), t_date),
    ], {**d, "featc": cap(feat), "r2c": cap(r2.phrase)}, who)
    t_iss = cv.tag()
    cv.add(s3, [
        ("O", ch(rng, ["How's the new place?", "Settling in okay at the new flat?"]), None),
        ("P", ch(rng, ["Mostly great, but {issue}.", "Love it, except {issue}."]), t_iss),
        ("O", react(rng, REACT_BAD), None),
        ("P", "Landlord says it'll be sorted 'soon'. We'll see.", None),
    ], d, who)
    cv.checkin(s2, s3, [("P", "Packing update: I own forty-one mugs. Forty-one.", None),
                        ("O", "Haha why?? You live with one other person!", None)], d, who)
    cv.q("single-hop", "Which neighbourhood did {P} move to?", [t_got], "{newhood}", d)
    cv.q("single-hop", "What problem turned up after {P} moved in?", [t_iss], "{issue_a}", d)
    cv.q("temporal", "When did {P} move into the new flat?", [t_date], r2.answer, d, date=r2.date.isoformat(), date_precision=r2.prec)
    cv.q("multi-hop", "Why was {P} looking for a new place, and what does the new one have that {Ps} liked?", [t_hunt, t_got],
         "the rent was going up by a third (lease ending); {feat_a}", d)
    cv.q("adversarial", "What went wrong in {O}'s new apartment?", [t_iss],
         "{O} didn't move; in {P}'s new flat {issue_a}", d, subtype="wrong-speaker")
    if trait:
        cv.trait(P.name, trait, [t_got], "{P} chose a flat with {feat_a}".format(**d))


def sl_injury(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    how, inj, ther, act, how3 = ch(rng, INJURIES)
    d.update(how=how, inj=inj, ther=ther, act=act)
    d["how3"] = fill(how3, d)
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r1 = rel_past(rng, cv.day(s1))
    d["r1"] = r1.phrase
    who = {"P": P.name, "O": O.name}
    t_inj, t_how = cv.tag(), cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["Typing this very slowly. I {inj} {r1}.", "So I'm a bit broken. {r1c} I {inj}."]), t_inj),
        ("O", ch(rng, ["What?! How??", "Oh no!! What happened?"]), None),
        ("P", ch(rng, ["I {how}. Very graceful.", "Don't laugh. I {how}."]), t_how),
        ("O", react(rng, REACT_BAD), None),
    ], {**d, "r1c": cap(r1.phrase)}, who)
    t_th = cv.tag()
    cv.add(s2, [
        ("O", ch(rng, ["How's the recovery going?", "Are you healing okay?"]), None),
        ("P", ch(rng, ["Slowly. I've got {ther}.", "Getting there. It's {ther} for now."]), t_th),
        ("O", "Hang in there.", None),
    ], d, who)
    t_back = cv.tag()
    cv.add(s3, [
        ("P", ch(rng, ["Guess who's back to {act}!", "Milestone: I'm back to {act}. Carefully."]), t_back),
        ("O", react(rng, REACT_GOOD), None),
    ], d, who)
    weeks = max(1, round((cv.day(s3) - r1.date).days / 7))
    cv.checkin(s1, s2, [("O", "How are you feeling? Still sore?", None),
                        ("P", "Sore and very bored of the sofa. I've watched everything on TV.", None)], d, who)
    cv.q("single-hop", ch(rng, ["How did {P} get hurt?", "What caused {P}'s accident?"]), [t_how], "{Ps} {how3}", d)
    cv.q("single-hop", "What treatment did {P} have after the accident?", [t_th], "{ther}", d)
    cv.q("temporal", "When did {P} get injured?", [t_inj], r1.answer, d, date=r1.date.isoformat(), date_precision=r1.prec)
    cv.q("multi-hop", "What injury did {P} have, and roughly how long until {Ps} was back to {act}?", [t_inj, t_back],
         f"{inj.replace('my ', d['Pp'] + ' ')}; about {weeks} weeks", d)
    cv.q("adversarial", "How did {O} get injured?", [t_how], "{O} wasn't; {P} {how3}", d, subtype="wrong-speaker")


def sl_study(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    course, exam, field = cv.uniq(COURSES)
    d.update(course=course, exam=exam, field=field, pts=ch(rng, ["two", "three", "four"]))
    s1, s2, s3, s4 = cv.pick(4, 0, cv.n - 1, gap=2)
    r2 = rel_past(rng, cv.day(s3), after=cv.day(s2))
    d["r2"] = r2.phrase
    who = {"P": P.name, "O": O.name}
    t_en = cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["I've signed up for {course}. Two evenings a week, what was I thinking.",
                       "New thing: I'm doing {course}. Already regretting the homework."]), t_en),
        ("O", ch(rng, ["Good for you! What made you do it?", "Ooh, where did that come from?"]), None),
        ("P", "I've wanted to for years and I kept finding excuses.", None),
    ], d, who)
    cv.add(s2, [
        ("O", "How's the course?", None),
        ("P", ch(rng, ["Hard! {exam} is coming up and I'm nowhere near ready.", "Intense. I'm revising every night for {exam}."]), None),
    ], d, who)
    t_fail = cv.tag()
    cv.add(s3, [
        ("P", ch(rng, ["Well. Failed {exam} {r2}. By {pts} points.", "Got my result, I didn't pass. {pts} points short. I sat it {r2}."]), t_fail),
        ("O", react(rng, REACT_BAD) + " You can retake it though, right?", None),
        ("P", "Yeah, in a couple of months. Not giving up.", None),
    ], d, who)
    t_pass = cv.tag()
    cv.add(s4, [
        ("P", ch(rng, ["I PASSED. Second time lucky!", "Retake done, and I passed! Properly this time."]), t_pass),
        ("O", react(rng, REACT_GOOD), None),
    ], d, who)
    cv.checkin(s1, s2, [("O", "How's the studying going?", None),
                        ("P", "Slowly. I fall asleep on my notes most nights.", None)], d, who)
    cv.q("single-hop", "What is {P} studying in the evenings?", [t_en], "{course}", d)
    cv.q("single-hop", "By how much did {P} miss the pass mark?", [t_fail], "{pts} points", d)
    cv.q("temporal", "When did {P} sit the exam {Ps} failed?", [t_fail], r2.answer, d, date=r2.date.isoformat(), date_precision=r2.prec)
    cv.q("multi-hop", "How many attempts did it take {P} to pass {exam}?", [t_fail, t_pass], "two", d)
    cv.q("adversarial", "What course did {O} sign up for?", [t_en], "{O} didn't; {P} signed up for {course}", d, subtype="wrong-speaker")
    cv.trait(P.name, "bookish", [t_en, t_pass], "{P} studies {field} in the evenings".format(**d))


def sl_charity(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    cause, cshort = cv.uniq(CAUSES)
    ev, ev_a = ch(rng, [("a 10k", "a 10k run"), ("a sponsored cycle, a hundred kilometres", "a 100 km sponsored cycle"),
                        ("a sponsored swim", "a sponsored swim"), ("a charity hike up three peaks in a day", "a three-peaks hike")])
    why, why_a = ch(rng, [("my gran volunteered there for twenty years", "{Pp} gran volunteered there for twenty years"),
                          ("they helped my family out when I was a kid", "they helped {Pp} family when {Ps} was a kid"),
                          ("a friend of mine works there and I've seen what they do", "a friend works there and {Ps} has seen what they do")])
    d.update(cause=cause, cshort=cshort, ev=ev, ev_a=ev_a, why=why, why_a=fill(why_a, d), amt=ch(rng, ["£640", "$900", "£1,150", "$1,400", "€820"]),
             wd=ch(rng, ["Sunday", "Saturday"]))
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r2 = rel_future(rng, cv.day(s2), kinds=["in_weeks", "nth", "next_month"])
    d["r2"] = r2.phrase
    who = {"P": P.name, "O": O.name}
    t_vol, t_why = cv.tag(), cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["I've started volunteering at {cause} on {wd} mornings.", "So I help out at {cause} now, every {wd} morning."]), t_vol),
        ("O", "That's lovely. How come?", None),
        ("P", "Mostly because {why}.", t_why),
    ], d, who)
    t_ev = cv.tag()
    cv.add(s2, [
        ("P", ch(rng, ["Also I've signed up to do {ev} for {cause} {r2}. Please sponsor me, I'm begging.",
                       "I'm doing {ev} {r2} to raise money for {cause}. Sponsorship link incoming."]), t_ev),
        ("O", "Obviously! Send me the link.", None),
    ], d, who)
    t_amt = cv.tag()
    cv.add(s3, [
        ("P", ch(rng, ["We did it! Raised {amt} in the end.", "Finished! And the total came to {amt}."]), t_amt),
        ("O", react(rng, REACT_GOOD), None),
    ], d, who)
    cv.checkin(s2, s3, [("O", "How's the training for the fundraiser going?", None),
                        ("P", "Slowly but surely! My legs hate me.", None)], d, who)
    cv.q("single-hop", "Where does {P} volunteer?", [t_vol], "{cause}", d)
    cv.q("single-hop", "Why did {P} pick {cause} to give {Pp} time to?", [t_why], "{why_a}", d)
    cv.q("temporal", "When was {P}'s fundraiser?", [t_ev], r2.answer, d, date=r2.date.isoformat(), date_precision=r2.prec)
    cv.q("multi-hop", "What did {P} do to raise money, and how much did it bring in?", [t_ev, t_amt], "{ev_a}; {amt}", d)
    cv.q("adversarial", "How much money did {O} raise?", [t_amt], "{O} didn't fundraise; {P} raised {amt}", d, subtype="wrong-speaker")
    cv.q("open-domain", "What kind of cause might {P} donate to?", [t_vol, t_ev], "{cshort} (volunteers there and fundraised for it)", d)


def sl_car(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    yr, model, col = cv.uniq(CARS)
    d.update(yr=yr, model=model, col=col, bike=ch(rng, ["an electric cargo bike", "a second-hand e-bike", "a bus pass and a folding bike"]))
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r1 = rel_past(rng, cv.day(s1))
    r2 = rel_past(rng, cv.day(s2), after=cv.day(s1))
    d["r1"], d["r2"] = r1.phrase, r2.phrase
    who = {"P": P.name, "O": O.name}
    t_buy = cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["I'm officially a car owner! Picked it up {r1}. A {yr} {model}, {col}.",
                       "Bought a car {r1}. Nothing fancy, a {col} {yr} {model} with about a million miles on it."]), t_buy),
        ("O", ch(rng, ["Road trip!!", "Look at you, a grown-up."]), None),
    ], d, who)
    t_bd = cv.tag()
    cv.add(s2, [
        ("P", ch(rng, ["The car died on the motorway {r2}. Smoke, hazard lights, the works.", "{r2c} the car just stopped. On a roundabout. At rush hour."]), t_bd),
        ("O", react(rng, REACT_BAD), None),
        ("P", "The mechanic said it's the head gasket, which I gather is bad.", None),
    ], {**d, "r2c": cap(r2.phrase)}, who)
    t_sold = cv.tag()
    cv.add(s3, [
        ("P", ch(rng, ["Update: I sold the {model}. I'm getting around on {bike} now and honestly I love it.",
                       "Said goodbye to the {model} for scrap money. It's {bike} from now on."]), t_sold),
        ("O", "Honestly probably for the best.", None),
    ], d, who)
    cv.checkin(s1, s2, [("P", "Drove to the coast on Sunday with the windows down. Felt like I was in a film.", None),
                        ("O", "Love that. Freedom!", None)], d, who)
    cv.q("single-hop", "What car did {P} buy?", [t_buy], "a {col} {yr} {model}", d)
    cv.q("single-hop", "How does {P} get around these days?", [t_sold], "{bike}", d)
    cv.q("temporal", "When did {P}'s car break down?", [t_bd], r2.answer, d, date=r2.date.isoformat(), date_precision=r2.prec)
    cv.q("multi-hop", "Why did {P} get rid of the car, and what replaced it?", [t_bd, t_sold], "it broke down (head gasket); {bike}", d)
    cv.q("adversarial", "What colour is {O}'s car?", [t_buy], "{O}'s car isn't mentioned; {P}'s is {col}", d, subtype="wrong-speaker")


def sl_concert(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    band = cv.uniq(BANDS)
    d.update(band=band, mv=ch(rng, VENUES_MUSIC), comp=P.partner or cv.uniq(OTHER_NAMES),
             why=ch(rng, [("the singer lost her voice", "the singer lost her voice"), ("there was a flood at the venue", "the venue flooded"),
                          ("their drummer broke his arm", "the drummer broke his arm")]))
    d["why_t"], d["why_a"] = d["why"]
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r3 = rel_past(rng, cv.day(s3), after=cv.day(s2))
    d["r3"] = r3.phrase
    who = {"P": P.name, "O": O.name}
    t_tix = cv.tag()
    cv.add(s1, [
        ("P", ch(rng, ["I got tickets to see {band} at {mv}!!", "Ahh I managed to get {band} tickets, the site crashed twice."]), t_tix),
        ("O", ch(rng, ["No way, I love them!", "Lucky! Who are you going with?"]), None),
        ("P", "{comp} is coming, obviously. It's been a dream since I was a teenager.", None),
    ], d, who)
    t_mv = cv.tag()
    cv.add(s2, [
        ("P", ch(rng, ["Gutted. The gig got postponed, {why_t}.", "Bad news, they've rescheduled the show because {why_t}."]), t_mv),
        ("O", react(rng, REACT_BAD), None),
    ], d, who)
    t_saw = cv.tag()
    cv.add(s3, [
        ("P", ch(rng, ["Finally saw them {r3}! Worth the wait.", "The rescheduled show was {r3} and I'm still buzzing."]), t_saw),
        ("O", "Did they play the good ones?", None),
        ("P", "Every single one. I cried during the encore, no shame.", None),
    ], d, who)
    cv.checkin(s2, s3, [("O", "Any new date for the gig yet?", None),
                        ("P", "They've announced it, I'm counting down.", None)], d, who)
    cv.q("single-hop", "Which band did {P} get tickets for?", [t_tix], "{band}", d)
    cv.q("single-hop", "Why was the show {P} was going to postponed?", [t_mv], "{why_a}", d)
    cv.q("temporal", "When did {P} finally see {band}?", [t_saw], r3.answer, d, date=r3.date.isoformat(), date_precision=r3.prec)
    cv.q("adversarial", "Why did {O}'s concert get postponed?", [t_mv], "Not {O}'s; {P}'s {band} gig was postponed because {why_a}", d, subtype="wrong-speaker")
    cv.trait(P.name, "music", [t_tix, t_saw], "{P} has loved {band} since {Ps} was a teenager".format(**d))


def sl_kid(cv, P, O):
    rng = cv.rng
    if not P.kid:
        raise Retry()
    d = base_slots(cv, P, O)
    kname, kg, kage = P.kid
    d.update(kid=kname, kage=kage, kidrel="daughter" if kg == "f" else "son", sport=ch(rng, ["football", "swimming lessons", "judo", "gymnastics", "hockey"]),
             part=ch(rng, ["a tree", "the narrator", "the grumpy innkeeper", "a very loud sheep", "the wolf"]))
    d.update(pron(kg, "k"))
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r1 = rel_past(rng, cv.day(s1))
    d["r1"] = r1.phrase
    who = {"P": P.name, "O": O.name}
    t_sp = cv.tag()
    cv.add(s1, [
        ("P", "{kid} started {sport} {r1}. {kS} came home muddy and thrilled.", t_sp),
        ("O", "Aww! Is {ks} any good?", None),
        ("P", "No idea, but the enthusiasm is off the charts.", None),
    ], d, who)
    t_part = cv.tag()
    cv.add(s2, [
        ("P", "Breaking news from the school: {kid} got cast as {part} in the play.", t_part),
        ("O", react(rng, REACT_FUN), None),
        ("P", "{kS} practises {kp} lines at breakfast. Every. Breakfast.", None),
    ], d, who)
    t_tooth = cv.tag()
    cv.add(s3, [
        ("O", "How's {kid}?", None),
        ("P", ch(rng, ["Lost {kp} first tooth at {sport} and wants a pound from the tooth fairy. Inflation.",
                       "Just lost a front tooth! {kS}'s convinced the tooth fairy is a spy."]), t_tooth),
    ], d, who)
    cv.checkin(s1, s3, [("O", "How's {kid} doing at school?", None),
                        ("P", "Loving it mostly. Hates maths, loves lunch.", None)], d, who)
    cv.q("single-hop", "What activity did {P}'s {kidrel} start?", [t_sp], "{sport}", d)
    cv.q("single-hop", "What part did {kid} get in the school play?", [t_part], "{part}", d)
    cv.q("temporal", "When did {kid} start {sport}?", [t_sp], r1.answer, d, date=r1.date.isoformat(), date_precision=r1.prec)
    cv.q("multi-hop", "What activities is {kid} involved in?", [t_sp, t_part], "{sport} and the school play (as {part})", d)
    cv.q("adversarial", "What role did {O}'s child play in the school play?", [t_part], "Not {O}'s child; {P}'s {kidrel} {kid} was {part}", d, subtype="wrong-speaker")
    cv.trait(P.name, "family", [t_sp, t_part], "{P} follows every step of {kid}'s activities".format(**d))


def sl_business(cv, P, O):
    rng = cv.rng
    d = base_slots(cv, P, O)
    prod, short, best = cv.uniq(PRODUCTS)
    d.update(prod=prod, short=short, best=best, friend=cv.uniq(OTHER_NAMES), market=ch(rng, ["the Saturday market in {hood}", "the makers' market at the old mill", "the night market by the docks"]),
             shop=ch(rng, ["a café in {town}", "the gift shop at the museum", "a little boutique in {hood}"]))
    d["market"] = fill(d["market"], d)
    d["shop"] = fill(d["shop"], d)
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r2 = rel_future(rng, cv.day(s2), kinds=["weekday", "next_week", "nth"])
    d["r2"] = r2.phrase
    who = {"P": P.name, "O": O.name}
    t_start = cv.tag()
    cv.add(s1, [
        ("P", "I've been making {prod} in the kitchen at night and {friend} talked me into selling them.", t_start),
        ("O", "Wait, that's so cool! Online?", None),
        ("P", "Yeah, a little online shop for now. Three orders so far, two from my mum.", None),
    ], d, who)
    t_stall = cv.tag()
    cv.add(s2, [
        ("P", "I got a stall at {market} {r2}! Terrified.", t_stall),
        ("O", "I'll come! Save me some of the {best}.", None),
    ], d, who)
    t_big = cv.tag()
    cv.add(s3, [
        ("P", ch(rng, ["Massive news: {shop} wants to stock my {short}!", "So {shop} emailed, they want to sell my {short}."]), t_big),
        ("O", react(rng, REACT_GOOD), None),
    ], d, who)
    cv.checkin(s1, s2, [("O", "How's the little shop going?", None),
                        ("P", "A few orders a week! My kitchen permanently smells like my stock now.", None)], d, who)
    cv.q("single-hop", "What does {P} make and sell?", [t_start], "{prod}", d)
    cv.q("single-hop", "Who convinced {P} to start selling?", [t_start], "{friend}", d)
    cv.q("temporal", "When did {P} have {Pp} market stall?", [t_stall], r2.answer, d, date=r2.date.isoformat(), date_precision=r2.prec)
    cv.q("multi-hop", "Where can people buy {P}'s {short}?", [t_start, t_stall, t_big], "online, at {market}, and at {shop}", d)
    cv.q("adversarial", "What does {O} sell online?", [t_start], "Nothing mentioned; {P} sells {prod}", d, subtype="wrong-speaker")
    cv.trait(P.name, "creative", [t_start, t_big], "{P} makes {prod} by hand".format(**d))


def sl_dating(cv, P, O):
    rng = cv.rng
    if P.partner:
        raise Retry()
    d = base_slots(cv, P, O)
    g = rng.choice("fm")
    nm = cv.uniq(OTHER_F if g == "f" else OTHER_M)
    d.update(nm=nm, where=ch(rng, ["a friend's birthday drinks", "the queue at the post office", "a pub quiz", "a climbing wall", "a wedding, as the only two people not dancing"]),
             job=ch(rng, ["a nurse", "a carpenter", "a marine biologist", "a primary school teacher", "a pilot", "a baker"]),
             date_=ch(rng, ["crazy golf", "a pottery painting café", "a night walk with a flask of hot chocolate", "a terrible film"]))
    d.update(pron(g, "n"))
    s1, s2, s3 = cv.pick(3, 0, cv.n - 1, gap=2)
    r1 = rel_past(rng, cv.day(s1))
    r3 = rel_future(rng, cv.day(s3), kinds=["next_month", "in_weeks", "nth"])
    d["r1"], d["r3"] = r1.phrase, r3.phrase
    who = {"P": P.name, "O": O.name}
    t_met, t_job = cv.tag(), cv.tag()
    cv.add(s1, [
        ("P", "I went on a date {r1}. With an actual person.", None),
        ("O", "!!! Tell me everything", None),
        ("P", "{nm}. We met at {where}.", t_met),
        ("O", "And what does {ns} do?", None),
        ("P", "{nS}'s {job}. And funny. Annoyingly funny.", t_job),
    ], d, who)
    t_d2 = cv.tag()
    cv.add(s2, [
        ("O", "So... still seeing {nm}?", None),
        ("P", "Yes! We did {date_} last week, it was perfect.", t_d2),
    ], d, who)
    t_mv = cv.tag()
    cv.add(s3, [
        ("P", "Okay, big step: {nm} is moving in {r3}.", t_mv),
        ("O", react(rng, REACT_GOOD) + " Already?", None),
        ("P", "I know. When you know, you know.", None),
    ], d, who)
    cv.checkin(s2, s3, [("O", "How are things with {nm}?", None),
                        ("P", "Really good. Like, suspiciously good.", None)], d, who)
    cv.q("single-hop", "How did {P} meet {nm}?", [t_met], "at {where}", d)
    cv.q("single-hop", "What does {nm} do for a living?", [t_job], "{job}", d)
    cv.q("temporal", "When is {nm} moving in with {P}?", [t_mv], r3.answer, d, date=r3.date.isoformat(), date_precision=r3.prec)
    cv.q("multi-hop", "Who is {P} dating, and what did they do on a recent date?", [t_met, t_d2], "{nm}; {date_}", d)
    cv.q("adversarial", "Where did {O} meet {nm}?", [t_met], "{O} didn't; {P} met {nm} at {where}", d, subtype="wrong-speaker")


# One-off facts: one exchange in one session.
ONEOFFS = [
    dict(id="museum", why="{P} spent a day at the {museum} and bought a print", trait="creative",
         lines=[("P", "Went to the {museum} {r} with {comp}. There was a whole room of {exh}.", "a"),
                ("O", "Ooh, was it good?", None),
                ("P", "Loved it. I bought a print of {prnt} for the hallway.", "b")],
         slots=dict(museum=["natural history museum", "modern art gallery", "science museum", "city museum"],
                    exh=["old maps", "giant beetles", "neon signs", "Victorian toys"], prnt=["a heron", "an old tram map", "a lighthouse", "a sunflower field"]),
         qs=[("single-hop", "What did {P} buy at the {museum}?", ["b"], "a print of {prnt}"),
             ("temporal", "When did {P} go to the {museum}?", ["a"], "@date"),
             ("adversarial", "What did {O} buy at the {museum}?", ["b"], "{O} didn't go; {P} bought a print of {prnt}")]),
    dict(id="recipe", why="{P} tried cooking {dish} from a family recipe", trait="foodie",
         lines=[("P", "I attempted {dish} {r}, {comp}'s grandma's recipe.", "a"),
                ("O", "How did it turn out?", None),
                ("P", "Flavour was perfect but I burnt the bottom so badly the pan's in the bin.", "b")],
         slots=dict(dish=DISHES),
         qs=[("single-hop", "Whose recipe did {P} try?", ["a"], "{comp}'s grandma's"),
             ("single-hop", "What happened to the pan when {P} cooked {dish}?", ["b"], "{Ps} burnt it so badly it was thrown away"),
             ("adversarial", "What did {O} cook from {comp}'s grandma's recipe?", ["a"], "{O} didn't; {P} made {dish}")]),
    dict(id="lost", trait=None,
         lines=[("P", "I left my {item} on the {tr} {r}. I'm an idiot.", "a"),
                ("O", "Noo! Did you get it back?", None),
                ("P", "A lady from lost property rang me, it had been handed in with everything still in it.", "b")],
         slots=dict(item=["backpack", "laptop bag", "wallet", "guitar"], tr=["bus", "train", "tram", "ferry"]),
         qs=[("single-hop", "What did {P} leave behind on public transport?", ["a"], "{Pp} {item}"),
             ("temporal", "When did {P} lose {Pp} {item}?", ["a"], "@date"),
             ("adversarial", "Did {O} get {Op} {item} back?", ["b"], "{O} lost nothing; {P}'s {item} came back via lost property")]),
    dict(id="birthday", trait=None,
         lines=[("P", "It was my birthday {r}!", "a"),
                ("O", "Happy belated!! What did you do?", None),
                ("P", "{comp} surprised me with {gift}. I didn't suspect a thing.", "b")],
         slots=dict(gift=["a hot air balloon ride", "tickets to a cooking class", "a weekend in a cabin", "a vintage record player"]),
         qs=[("single-hop", "What was {P}'s birthday surprise?", ["b"], "{gift}"),
             ("temporal", "When is {P}'s birthday?", ["a"], "@date"),
             ("adversarial", "What did {O} get for {Op} birthday?", ["b"], "Not said for {O}; {P} got {gift}")]),
    dict(id="game", why="{P} went to a {sport} game", trait="sporty",
         lines=[("P", "{comp} dragged me to a {sport} game {r}.", "a"),
                ("P", "We lost in the last minute, but the hot dogs were elite.", "b"),
                ("O", "Haha at least the food was good.", None)],
         slots=dict(sport=["baseball", "rugby", "hockey", "basketball"]),
         qs=[("single-hop", "What sport did {P} watch live with {comp}?", ["a"], "{sport}"),
             ("adversarial", "Who did {O} go to the {sport} game with?", ["a"], "{O} didn't; {P} went with {comp}")]),
    dict(id="haircut", trait=None,
         lines=[("P", "Got my hair cut {r}. Went for {style}.", "a"),
                ("O", "Brave! Photo please.", None)],
         slots=dict(style=["a full buzz cut", "a fringe, after ten years without one", "a bob", "bleached tips, don't ask"]),
         qs=[("single-hop", "What new look did {P} go for?", ["a"], "{style}"),
             ("temporal", "When did {P} get a haircut?", ["a"], "@date")]),
    dict(id="book", why="{P} stayed up until 2am to finish {book}", trait="bookish",
         lines=[("P", "Just finished {book}. Stayed up till two to get to the end.", "a"),
                ("O", "Was it worth it?", None),
                ("P", "The ending made me so angry I threw it across the room. So, yes.", "b")],
         slots=dict(book=["The Salt Road", "A Map of Small Rooms", "Winter in Ostend", "The Lighthouse Keeper's Wife", "Nine Rivers"]),
         qs=[("single-hop", "Which book kept {P} up until 2am?", ["a"], "{book}"),
             ("single-hop", "How did {P} react to the ending of {book}?", ["b"], "threw it across the room (angry, but loved it)"),
             ("adversarial", "What did {O} think of {book}?", ["b"], "{O} didn't say; {P} was angry at the ending")]),
    dict(id="wildlife", why="{P} runs outside and spotted {animal}", trait="outdoors",
         lines=[("P", "Saw {animal} on my run this morning, right by the {lm}.", "a"),
                ("O", "No way, lucky!", None)],
         slots=dict(animal=["a fox", "a deer", "an otter", "a heron", "a family of ducklings"], lm=["bridge", "old boathouse", "water tower", "cemetery gates"]),
         qs=[("single-hop", "What animal did {P} see out running?", ["a"], "{animal}"),
             ("adversarial", "What animal did {O} see by the {lm}?", ["a"], "{O} didn't; {P} saw {animal}")]),
    dict(id="neighbour", trait=None,
         lines=[("P", "My neighbour {nb} brought over {food} {r}, for no reason at all.", "a"),
                ("O", "Keep that neighbour forever.", None)],
         slots=dict(food=["a whole lemon cake", "a bag of plums from her tree", "leftover curry", "fresh eggs"]),
         qs=[("single-hop", "What did {P}'s neighbour bring round?", ["a"], "{food}"),
             ("single-hop", "What is the name of {P}'s neighbour?", ["a"], "{nb}")]),
    dict(id="camping", why="{P} went camping at {lake}", trait="outdoors",
         lines=[("P", "We went camping at {lake} {r}. No signal, no showers, perfect.", "a"),
                ("O", "Did you see anything cool?", None),
                ("P", "The Milky Way! I didn't know you could actually see it with your eyes.", "b")],
         slots=dict(lake=["Lost Lake", "Beaver Creek", "the lake up past the dam", "Pine Hollow"]),
         qs=[("single-hop", "Where did {P} go camping?", ["a"], "{lake}"),
             ("single-hop", "What did {P} see in the night sky while camping?", ["b"], "the Milky Way"),
             ("temporal", "When did {P} go camping?", ["a"], "@date")]),
    dict(id="dentist", trait=None,
         lines=[("P", "Had a root canal {r}. My face is still numb.", "a"),
                ("O", "Ugh, my worst nightmare. Poor you.", None)],
         slots=dict(),
         qs=[("single-hop", "What did {P} have done at the dentist?", ["a"], "a root canal"),
             ("temporal", "When was {P}'s root canal?", ["a"], "@date")]),
    dict(id="baby", trait=None,
         lines=[("P", "My best friend {bf} had her baby {r}! A little boy called {baby}.", "a"),
                ("O", "Aww, congratulations to her!", None)],
         slots=dict(baby=["Arlo", "Felix", "Rory", "Ezra", "Jude"]),
         qs=[("single-hop", "What is {bf}'s baby called?", ["a"], "{baby}"),
             ("temporal", "When was {bf}'s baby born?", ["a"], "@date")]),
    dict(id="festival", why="{P} went to the {fest} in {town}", trait="foodie",
         lines=[("P", "Went to the {fest} in {town} {r}.", "a"),
                ("O", "Ooh what was the best thing you tried?", None),
                ("P", "{best}. I went back three times.", "b")],
         slots=dict(fest=["chilli festival", "cheese festival", "dumpling festival", "street food weekender"],
                    best=["A smoked brisket bun", "The blue cheese ice cream, weirdly", "Pork and chive dumplings", "A mango sticky rice thing"]),
         qs=[("single-hop", "What did {P} keep going back for at the {fest}?", ["b"], "{best}"),
             ("single-hop", "Where was the {fest} {P} went to?", ["a"], "{town}"),
             ("adversarial", "What did {O} eat at the {fest}?", ["b"], "{O} didn't go; {P} had {best}")]),
    dict(id="language", why="{P} is learning {lang}", trait="bookish",
         lines=[("P", "I'm on a {n}-day streak on my {lang} app, by the way.", "a"),
                ("O", "Whoa. Any reason?", None),
                ("P", "{comp}'s family only speaks {lang} and I want to understand the jokes at dinner.", "b")],
         slots=dict(n=["100", "150", "212", "300"], lang=["Portuguese", "Polish", "Korean", "Greek", "Italian"]),
         qs=[("single-hop", "What language is {P} learning?", ["a"], "{lang}"),
             ("single-hop", "Why is {P} learning {lang}?", ["b"], "to understand {comp}'s family at dinner")]),
    dict(id="flood", trait=None,
         lines=[("P", "Our bathroom flooded {r}. Water came through the ceiling of the flat downstairs.", "a"),
                ("O", "Oh no! What happened?", None),
                ("P", "A pipe under the bath just gave up. The plumber said it was older than me.", "b")],
         slots=dict(),
         qs=[("single-hop", "What caused the flood in {P}'s bathroom?", ["b"], "a pipe under the bath burst"),
             ("temporal", "When did {P}'s bathroom flood?", ["a"], "@date"),
             ("adversarial", "Whose ceiling did {O}'s bathroom leak through?", ["a"], "{O}'s didn't; {P}'s flooded the flat downstairs")]),
    dict(id="marathon", why="{P} went to cheer at the {town} marathon", trait="sporty",
         lines=[("P", "Went to cheer {comp} on at the {town} marathon {r}.", "a"),
                ("O", "Amazing! How did it go?", None),
                ("P", "Finished in {time}! I screamed so much I lost my voice.", "b")],
         slots=dict(time=["four hours ten", "three hours fifty-two", "just under five hours", "four hours and a bit"]),
         qs=[("single-hop", "How long did {comp} take to finish the marathon?", ["b"], "{time}"),
             ("temporal", "When was the marathon {P} went to watch?", ["a"], "@date"),
             ("adversarial", "What was {O}'s marathon time?", ["b"], "{O} didn't run; {comp} finished in {time}")]),
    dict(id="ring", trait=None,
         lines=[("P", "I lost my grandmother's ring {r} and had a full meltdown.", "a"),
                ("O", "Oh no, please tell me you found it.", None),
                ("P", "Found it in the compost bin, of all places. No idea how.", "b")],
         slots=dict(),
         qs=[("single-hop", "Where did {P}'s grandmother's ring turn up?", ["b"], "in the compost bin"),
             ("adversarial", "What did {O} lose in the garden?", ["a", "b"], "{O} lost nothing; {P} lost {Pp} grandmother's ring")]),
    dict(id="beachclean", why="{P} spent a day picking plastic off a beach", trait="outdoors",
         lines=[("P", "Did a beach clean with work {r}. We collected {kg} kilos of plastic in one morning.", "a"),
                ("O", "That's both amazing and horrifying.", None)],
         slots=dict(kg=["forty", "sixty", "twenty-five", "eighty"]),
         qs=[("single-hop", "How much rubbish did {P}'s group pick up?", ["a"], "{kg} kilos of plastic"),
             ("temporal", "When did {P} do the beach clean?", ["a"], "@date")]),
    dict(id="cookclass", why="{P} did a {cuisine} cooking class", trait="foodie",
         lines=[("P", "Did a {cuisine} cooking class {r}, {comp} booked it as a surprise.", "a"),
                ("O", "Ooh what did you make?", None),
                ("P", "{dish2}. Mine looked terrible but tasted great.", "b")],
         slots=dict(cuisine=["Thai", "Georgian", "Sichuan", "Lebanese"], dish2=["Three curries", "Dumplings and a bean stew", "Mapo tofu", "Flatbreads and about nine dips"]),
         qs=[("single-hop", "What cuisine did {P} learn to cook?", ["a"], "{cuisine}"),
             ("single-hop", "Who booked the cooking class for {P}?", ["a"], "{comp}"),
             ("adversarial", "What did {O} make at the {cuisine} cooking class?", ["b"], "{O} didn't go; {P} made {dish2}")]),
    dict(id="piano", why="{P} bought a second-hand piano", trait="music",
         lines=[("P", "I bought a second-hand piano {r}. It took four people to get it up the stairs.", "a"),
                ("O", "Can you play?", None),
                ("P", "Badly! I had lessons until I was twelve. Starting again from scratch.", "b")],
         slots=dict(),
         qs=[("single-hop", "What did {P} buy that needed four people to carry?", ["a"], "a second-hand piano"),
             ("single-hop", "Until what age did {P} have music lessons as a kid?", ["b"], "twelve"),
             ("temporal", "When did {P} get the piano?", ["a"], "@date")]),
    dict(id="quiz", why="{P} goes to a pub quiz", trait="bookish",
         lines=[("P", "Our pub quiz team finally won {r}!", "a"),
                ("O", "Finally! What was the prize?", None),
                ("P", "{prize}. We were hoping for cash.", "b")],
         slots=dict(prize=["A meat raffle voucher", "A bottle of very cheap wine", "A giant chocolate bar", "Free chips for a month"]),
         qs=[("single-hop", "What did {P}'s quiz team win?", ["b"], "{prize}"),
             ("temporal", "When did {P}'s team win the quiz?", ["a"], "@date")]),
    dict(id="tattoo", trait=None,
         lines=[("P", "Got my first tattoo {r}!", "a"),
                ("O", "No way! What of?", None),
                ("P", "A tiny {design} on my ankle. It hurt way more than I expected.", "b")],
         slots=dict(design=["swallow", "wave", "lemon", "pine tree", "paper plane"]),
         qs=[("single-hop", "What design did {P} get tattooed?", ["b"], "a tiny {design} on {Pp} ankle"),
             ("temporal", "When did {P} get {Pp} first tattoo?", ["a"], "@date"),
             ("adversarial", "Where is {O}'s tattoo?", ["b"], "{O} has none mentioned; {P}'s is on {Pp} ankle")]),
    dict(id="driving", trait=None,
         lines=[("P", "I passed my driving test {r}! Third time lucky.", "a"),
                ("O", "FINALLY! Congratulations!", None)],
         slots=dict(),
         qs=[("single-hop", "On which attempt did {P} pass the driving test?", ["a"], "the third"),
             ("temporal", "When did {P} pass {Pp} driving test?", ["a"], "@date")]),
    dict(id="grandma", why="{P} celebrated {Pp} grandmother's ninetieth with the family", trait="family",
         lines=[("P", "My grandma turned ninety {r}. We threw her a party at the care home.", "a"),
                ("O", "Ninety! How was it?", None),
                ("P", "She out-danced all of us and asked the vicar for his number.", "b")],
         slots=dict(),
         qs=[("single-hop", "How old did {P}'s grandmother turn?", ["a"], "ninety"),
             ("single-hop", "What did {P}'s grandmother do at her party?", ["b"], "out-danced everyone and asked the vicar for his number"),
             ("temporal", "When was {P}'s grandma's ninetieth?", ["a"], "@date")]),
    dict(id="hike", why="{P} hiked {peak}", trait="outdoors",
         lines=[("P", "We did the {peak} hike {r}. Eight hours up and down.", "a"),
                ("O", "Wow. How are your legs?", None),
                ("P", "Destroyed. But the view from the top was unreal, we could see the sea.", "b")],
         slots=dict(peak=["Ben Lomond", "Mount Si", "the Snowdon horseshoe", "Mount Tallac", "Croagh Patrick"]),
         qs=[("single-hop", "Which hike did {P} do?", ["a"], "{peak}"),
             ("single-hop", "What could {P} see from the top?", ["b"], "the sea"),
             ("temporal", "When did {P} hike {peak}?", ["a"], "@date")]),
]


def add_oneoff(cv, P, O, tpl):
    rng = cv.rng
    d = base_slots(cv, P, O)
    for k, pool in tpl["slots"].items():
        d[k] = ch(rng, pool)
    d["comp"] = P.partner or P.friend
    d["nb"] = cv.uniq(OTHER_NAMES)
    d["bf"] = P.friend
    s = cv.pick(1)[0]
    r = rel_past(rng, cv.day(s))
    d["r"] = r.phrase
    tags = {}
    lines = []
    for role, text, t in tpl["lines"]:
        if t:
            tags[t] = cv.tag()
        lines.append((role, text, tags.get(t)))
    cv.add(s, lines, d, {"P": P.name, "O": O.name})
    for kind, qt, ev, ans in tpl["qs"]:
        extra = {}
        if ans == "@date":
            ans = r.answer
            extra = dict(date=r.date.isoformat(), date_precision=r.prec)
        if kind == "adversarial":
            extra["subtype"] = "wrong-speaker"
        cv.q(kind, qt, [tags[e] for e in ev], ans, d, **extra)
    if tpl["trait"]:
        cv.trait(P.name, tpl["trait"], [tags["a"]], fill(tpl["why"], d))


STORYLINES = {"pet": sl_pet, "job": sl_job, "trip": sl_trip, "hobby": sl_hobby, "wedding": sl_wedding,
              "move": sl_move, "injury": sl_injury, "study": sl_study, "charity": sl_charity, "car": sl_car,
              "concert": sl_concert, "kid": sl_kid, "business": sl_business, "dating": sl_dating}

TRAIT_Q = {
    "outdoors": [("Would {P} likely enjoy a weekend camping trip?", "Likely yes"),
                 ("Would {P} rather spend a Saturday outside than at a shopping centre?", "Likely outside")],
    "creative": [("Would {P} likely enjoy a day at a craft fair?", "Likely yes"),
                 ("Would an art supplies voucher be a good present for {P}?", "Likely yes")],
    "sporty": [("Is {P} likely to sign up for a charity fun run?", "Likely yes"),
               ("Would {P} enjoy an active holiday more than a beach holiday?", "Probably yes")],
    "foodie": [("Would {P} probably enjoy a street-food tour?", "Likely yes"),
               ("Would a cooking class be a good gift for {P}?", "Likely yes")],
    "music": [("Would {P} enjoy a music festival?", "Likely yes"),
              ("Would {P} want to go to an open mic night?", "Likely yes")],
    "animals": [("Would {P} look for a rental that allows pets?", "Yes"),
                ("Is {P} more of a dog person or a cat person?", "@pet")],
    "bookish": [("Would {P} likely enjoy a literary festival?", "Likely yes"),
                ("Does {P} seem to enjoy learning new things in {Pp} spare time?", "Yes")],
    "family": [("Is {P} close to {Pp} family?", "Yes"),
               ("Would {P} enjoy hosting a big family dinner?", "Likely yes")],
}


def trait_questions(cv):
    for name, traits in cv.traits.items():
        P = next(p for p in cv.people if p.name == name)
        d = P.slots("P")
        by = {}
        for trait, tags, reason in traits:
            by.setdefault(trait, []).append((tags, reason))
        for trait, items in sorted(by.items()):
            tags = [t for tg, _ in items for t in tg][:3]
            reasons = "; ".join(r for _, r in items)
            for text, ans in TRAIT_Q[trait]:
                if ans == "@pet":
                    if "dog" not in reasons and "cat" not in reasons:
                        continue
                    ans = "a dog person" if any(b in reasons for b in DOGS) else "a cat person"
                cv.sl = f"trait-{name}-{trait}"
                cv.q("open-domain", text, tags, f"{ans} ({reasons})", d)


def make_person(rng, name, g, used, local):
    """used: companies taken by earlier people; local: other names taken in this conversation."""
    p = Person(name, g)
    city = rng.choice(CITIES)
    p.city, p.south, p.hoods, p.town = city
    p.hood = rng.choice(p.hoods)
    p.street = rng.choice(STREETS)
    p.role = rng.choice(ROLES)
    p.company = rng.choice(WORKPLACES[p.role[0]])
    if rng.random() < 0.55:
        p.partner_g = rng.choice("fm")
        p.partner = rng.choice([n for n in (OTHER_F if p.partner_g == "f" else OTHER_M) if n not in local])
        local.add(p.partner)
    else:
        p.partner, p.partner_g = None, None
    p.kid = None
    if p.partner and rng.random() < 0.5:
        kg = rng.choice("fm")
        p.kid = (rng.choice(["Maisie", "Ada", "Ivy", "Nell"] if kg == "f" else ["Leo", "Finn", "Otto", "Alfie"]), kg, rng.randint(5, 10))
    p.sib_g = rng.choice("fm")
    p.sibling = rng.choice([n for n in (OTHER_F if p.sib_g == "f" else OTHER_M) if n not in local])
    local.add(p.sibling)
    p.sib_rel = "sister" if p.sib_g == "f" else "brother"
    p.friend = rng.choice([n for n in OTHER_F if n not in local])  # "had her baby"
    local.add(p.friend)
    return p


# ---------------------------------------------------------------------------------------------
# Small talk

SMALL = {
    # each entry: list of exchanges; an exchange is lines (role X/Y, text). Slots: {X} {Y} {Xcity}
    # {Ycity} {wd} {name} {show} {dish} {dest} {breed}. Each exchange is used at most once per
    # conversation, so the pools are large.
    "weekend": [
        [("X", "We spent most of Saturday at the farmers' market, I came home with way too many peaches."), ("Y", "Ha, that's how it always goes. We barely left the house all weekend and I regret nothing.")],
        [("X", "Helped my parents repaint their kitchen over the weekend. It's now a colour my mum calls 'avocado dream'."), ("Y", "Avocado dream 😂 I need to see this.")],
        [("X", "I didn't leave the sofa all Sunday except to get the pizza from the door."), ("Y", "Honestly that sounds like a perfect Sunday to me.")],
        [("X", "We had people over for board games on Saturday and it got way too competitive."), ("Y", "Let me guess, Monopoly?"), ("X", "Worse. Risk. Nobody's talking to my brother-in-law now.")],
        [("X", "I went for a really long walk along the river on Sunday, just me and a podcast."), ("Y", "That sounds so peaceful. I keep meaning to do more of that.")],
        [("X", "Spent the weekend clearing out the spare room. Found birthday cards from 2009."), ("Y", "Did you keep them?"), ("X", "Obviously. I'm a hoarder, we've established this.")],
        [("X", "A friend had a barbecue on Saturday and it poured down the whole time. We stood under a gazebo eating burgers."), ("Y", "That's the most classic barbecue story ever.")],
        [("X", "I tried to have a productive weekend and ended up reorganising my spice rack for three hours."), ("Y", "That counts as productive! Alphabetical?"), ("X", "By cuisine. I'm not proud.")],
        [("X", "We went to a car boot sale on Sunday and I bought a lamp shaped like a duck."), ("Y", "I have so many questions but mostly: how much?"), ("X", "Two pounds. Best money I've ever spent.")],
        [("X", "Went to a friend's housewarming on Saturday. Their new place is gorgeous, I'm so jealous."), ("Y", "Ugh, the house envy is real. Did they at least have good snacks?")],
        [("X", "I finally did a proper food shop and meal prep on Sunday. I feel like an adult."), ("Y", "Look at you! How long will it last?"), ("X", "Realistically until Wednesday.")],
        [("X", "Spent Saturday at my nephew's birthday party. Twelve six-year-olds and a bouncy castle."), ("Y", "You're a hero. Did you go on the bouncy castle?"), ("X", "Obviously. I pulled a muscle.")],
    ],
    "work": [
        [("X", "Our printer at work has been broken for three weeks and apparently nobody is in charge of it."), ("Y", "The printer is always the villain. Every office, every time.")],
        [("X", "Had a three-hour meeting today that could genuinely have been one email."), ("Y", "I feel that in my bones. Did anything get decided?"), ("X", "That we need another meeting.")],
        [("X", "Someone at work microwaved fish again. The whole floor smells like a harbour."), ("Y", "That should be a sackable offence honestly.")],
        [("X", "Our team did a quiz night and we came dead last."), ("Y", "Haha what round killed you?"), ("X", "Geography. We put Portugal next to Poland.")],
        [("X", "My work laptop decided to update itself in the middle of a presentation today."), ("Y", "Nooo. The classic. What did you do?"), ("X", "Stood there making small talk for eleven minutes.")],
        [("X", "There's a new person on my floor who says 'per my last email' out loud."), ("Y", "Out loud?? That's terrifying.")],
        [("X", "We got free pastries at work today because someone's leaving. I don't even know who they are."), ("Y", "Free pastries are free pastries. No questions asked.")],
        [("X", "I accidentally replied-all to the whole company today."), ("Y", "Oh no. What did it say?"), ("X", "Just 'lol'. To four hundred people.")],
        [("X", "The heating at work is either off or set to sauna, there's no in-between."), ("Y", "Ours is the same. I keep a cardigan in my drawer all year.")],
        [("X", "My team is doing a step challenge this month."), ("Y", "Are you winning?"), ("X", "Second from bottom. Walking to the fridge should count.")],
    ],
    "food": [
        [("X", "I made {dish} last night and it was... edible."), ("Y", "Haha high praise. Did you follow a recipe or freestyle it?"), ("X", "Freestyled. That was the problem.")],
        [("X", "What are you having for dinner tonight?"), ("Y", "Toast. I have given up on life."), ("X", "Honestly respect. I'm having cereal.")],
        [("X", "I tried that new dumpling place near my work and I think I'm in love."), ("Y", "Dangerous that it's so close. How many times this week?"), ("X", "Three. It's Wednesday.")],
        [("X", "Why is butter so expensive now? I paid a fortune for a tiny block."), ("Y", "Right?? Everything's gone mad. I've started buying the own-brand stuff.")],
        [("X", "I'm trying to drink less coffee this month."), ("Y", "How's that going?"), ("X", "I'm on my third cup. So, badly.")],
        [("X", "Is it weird that I'm already thinking about lunch at half nine?"), ("Y", "It's never too early to think about lunch. What are you having?"), ("X", "Leftover {dish}, if nobody's stolen it.")],
        [("X", "Found a new coffee place near me, they do oat milk for free."), ("Y", "That's how they get you. First the free oat milk, then you're there every day.")],
        [("X", "I ate an entire bag of crisps for dinner and I'd do it again."), ("Y", "Balanced diet. Crisps are basically potatoes.")],
        [("X", "My neighbour gave me a massive bag of courgettes from her garden and I don't know what to do with them."), ("Y", "Courgette cake! Trust me on this one.")],
        [("X", "We ordered from that Thai place again. I think they know my voice now."), ("Y", "That's the dream honestly, to be a regular somewhere.")],
    ],
    "tv": [
        [("X", "Have you watched {show}? Everyone at work won't shut up about it."), ("Y", "Not yet! Is it good?"), ("X", "Three episodes in and I'm hooked. No spoilers from me though.")],
        [("X", "I stayed up way too late finishing {show}."), ("Y", "Was the ending worth it?"), ("X", "No! I'm still annoyed about it.")],
        [("X", "Can you recommend something to watch? I've finished everything."), ("Y", "Have you tried {show}? It starts slow but it gets good.")],
        [("X", "I've been listening to a podcast about shipwrecks, it's weirdly relaxing."), ("Y", "That's the most you thing I've ever heard.")],
        [("X", "I've had the same song stuck in my head all day."), ("Y", "Which one?"), ("X", "Some jingle from an advert. It's actual torture.")],
        [("X", "I rewatched a film from when we were kids and it's so much weirder than I remembered."), ("Y", "Which one?"), ("X", "The one with the talking dog. Deeply strange film.")],
        [("X", "Did you catch the match on Sunday?"), ("Y", "Only the second half. What a finish though!")],
        [("X", "I started a new audiobook on my commute, a thriller. I missed my stop twice."), ("Y", "That's the sign of a good one.")],
    ],
    "health": [
        [("X", "I slept ten hours last night and I feel like a new person."), ("Y", "Teach me your ways. I've been up at five every day this week.")],
        [("X", "I think I'm coming down with something, my throat's all scratchy."), ("Y", "Lots of water and an early night! Take care of yourself.")],
        [("X", "I'm so tired this week. Like, bone-tired."), ("Y", "Same. Early night tonight for both of us, deal?"), ("X", "Deal.")],
        [("X", "I went to bed at nine last night like a grandma."), ("Y", "Sounds like the dream honestly. I was up till one scrolling.")],
        [("X", "I've been trying to stretch every morning. My back makes noises I didn't know backs could make."), ("Y", "Haha that's how you know it's working. Probably.")],
        [("X", "Had my eyes tested today. Turns out I've been squinting at screens for a year for no reason."), ("Y", "New glasses! Are you getting fancy frames?")],
        [("X", "I've been trying to take a proper lunch break away from my desk."), ("Y", "That's a good habit. I always end up eating over my keyboard.")],
    ],
    "family": [
        [("X", "My mum has discovered voice notes. Twelve-minute voice notes."), ("Y", "Haha mine only sends a thumbs up to everything, even bad news.")],
        [("X", "I keep meaning to call my grandad more."), ("Y", "Do it this weekend. He'd love that, I'm sure.")],
        [("X", "My dad has taken up sourdough. The whole family group chat is bread photos now."), ("Y", "That's adorable. Is it any good?"), ("X", "It's a brick. We're all very supportive.")],
        [("X", "My parents are thinking about moving to the coast when they retire."), ("Y", "Oh that'd be lovely for them. Free holidays for you too!")],
        [("X", "My little cousin just got into university, the whole family is so proud."), ("Y", "That's wonderful! What's she going to study?"), ("X", "Marine biology. She's loved the sea since she was tiny.")],
        [("X", "My aunt sent me a birthday card three months late with a fiver in it."), ("Y", "Aunts are the best. Never change, aunts.")],
        [("X", "Family dinner at my parents' tonight. Pray for me."), ("Y", "Politics or no politics?"), ("X", "We've agreed on no politics. It won't last.")],
    ],
    "city": [
        [("X", "They've been digging up the road outside my flat for two months. For what, nobody knows."), ("Y", "Classic. Ours has had a hole with a cone in it since spring.")],
        [("X", "Someone painted a huge mural on the side of the bakery near me. It's a whale wearing a hat."), ("Y", "I love that. Every city needs a whale in a hat.")],
        [("X", "The bus was forty minutes late this morning."), ("Y", "Classic. Did you make it in on time?"), ("X", "Barely. Sprinted up the stairs.")],
        [("X", "How's {Ycity} these days?"), ("Y", "Same as ever. Busy, expensive, but I love it."), ("X", "Ha. Sounds about right.")],
        [("X", "A new bookshop opened round the corner and I've already spent too much there."), ("Y", "Bookshops should be illegal for people like us.")],
        [("X", "The sunset tonight was unreal, the whole sky went pink."), ("Y", "I saw it too! I took about forty photos.")],
        [("X", "There was a brass band playing outside the station this morning, totally random."), ("Y", "That's the kind of thing that makes a morning though.")],
        [("X", "My landlord finally fixed the window. Only took three months and eleven emails."), ("Y", "Progress! Frame those emails.")],
    ],
    "chat": [
        [("X", "You always know how to cheer me up, you know that?"), ("Y", "That's what friends are for! Seriously, anytime.")],
        [("X", "It's so important to make time for the things that make you happy, you know?"), ("Y", "Totally. I'm trying to be better at that this year.")],
        [("X", "Been thinking about you, hope this week's treating you okay."), ("Y", "Aww that's sweet. It's been a week, but I'm alright.")],
        [("X", "Do you ever just sit in the car for ten minutes before going inside?"), ("Y", "Every single day. It's my quiet time.")],
        [("X", "I found an old photo of us from uni on my phone."), ("Y", "Oh no. The one with the terrible haircut?"), ("X", "The very same haha.")],
        [("X", "Do you want to do a video call this weekend?"), ("Y", "Yes please, it's been ages since I saw your face!")],
        [("X", "We should do a weekend away together at some point."), ("Y", "Yes! Let's actually plan it this time."), ("X", "Haha, we say that every time.")],
        [("X", "I'm really grateful we've kept in touch all these years, you know."), ("Y", "Me too. It's rare, honestly. Most people drift.")],
        [("X", "Happy {wd}! Almost there."), ("Y", "Ha, I completely forgot what day it was.")],
        [("X", "{name} from our old class messaged me out of nowhere."), ("Y", "Oh wow, what did they want?"), ("X", "To sell me protein powder, apparently.")],
        [("X", "I've been feeling a bit all over the place lately, not sure why."), ("Y", "That's totally normal. Want to talk about it, or want distracting?"), ("X", "Distracting, please.")],
        [("X", "Remember when we got lost trying to find that festival and ended up in a field of cows?"), ("Y", "How could I forget. Best day of that summer.")],
    ],
    "home": [
        [("X", "My plants are all dying again."), ("Y", "Overwatering or underwatering?"), ("X", "Honestly no idea. Both?")],
        [("X", "I finally fixed the wobbly table."), ("Y", "Only took you what, a year?"), ("X", "Fourteen months, thank you very much.")],
        [("X", "I cleaned out my wardrobe and found a twenty in an old coat."), ("Y", "Best feeling in the world!")],
        [("X", "My phone screen cracked again, third time this year."), ("Y", "Okay, case time. No more excuses.")],
        [("X", "Our washing machine is making a noise like a jet engine."), ("Y", "That sounds expensive. Have you tried turning it off and on again?"), ("X", "Yes. It's angrier now.")],
        [("X", "I'm thinking about getting a fringe."), ("Y", "Don't do it at midnight with kitchen scissors, that's all I ask.")],
        [("X", "I bought a fancy candle and now I'm scared to light it."), ("Y", "Light the candle! Life's short.")],
        [("X", "My internet has been dropping out every evening, right when I want to watch anything."), ("Y", "The worst. Have you called them?"), ("X", "I've been on hold for forty minutes.")],
    ],
    "weather": [],  # filled per session by season
    "shopping": [
        [("X", "I went in for milk and came out with a pineapple, a plant and a doormat."), ("Y", "Classic supermarket trap. Was the doormat at least nice?"), ("X", "It says 'go away'. So yes.")],
        [("X", "I finally bought new trainers, my old ones had a hole you could fit a fist through."), ("Y", "About time! What did you get?"), ("X", "Boring grey ones. Comfy though.")],
        [("X", "Online shopping is dangerous at midnight."), ("Y", "What did you buy?"), ("X", "A waffle maker. I don't eat waffles.")],
        [("X", "I returned a jumper today and the queue was forty people long."), ("Y", "Was it worth the wait?"), ("X", "I got my twenty quid back, so technically yes.")],
        [("X", "The charity shop near me had a whole shelf of old board games."), ("Y", "Did you get any?"), ("X", "Obviously. Three, all with missing pieces.")],
        [("X", "Why does every shop play Christmas music in October now?"), ("Y", "It gets earlier every year, I swear.")],
    ],
    "tech": [
        [("X", "My laptop fan sounds like it's about to take off."), ("Y", "Have you tried hoovering it? Seriously, it works.")],
        [("X", "I spent an hour trying to connect the new printer to the wifi."), ("Y", "Did it work?"), ("X", "No. I emailed the file to myself and printed it at the library.")],
        [("X", "My phone autocorrected 'meeting' to 'meatball' in an email to my boss."), ("Y", "Honestly that's an improvement.")],
        [("X", "I turned off notifications for a week and I feel so much calmer."), ("Y", "I should try that. My phone buzzes every two seconds.")],
        [("X", "My screen time report this week was embarrassing."), ("Y", "How bad?"), ("X", "Six hours a day. Mostly videos of dogs.")],
    ],
    "memories": [
        [("X", "Do you remember our terrible flat in second year? The one with the mushroom in the bathroom?"), ("Y", "How could I forget. We named it Steve.")],
        [("X", "I walked past our old school today. It looks so small now."), ("Y", "Everything from childhood looks tiny when you go back.")],
        [("X", "I heard the song we used to blast in your car and got so nostalgic."), ("Y", "The one we knew every word of? I still do.")],
        [("X", "Remember when we tried to make pancakes at 3am and set off the fire alarm?"), ("Y", "The whole building out on the street in pyjamas. Legendary.")],
        [("X", "I found my old diary from when I was fourteen."), ("Y", "Oh no. Was it dramatic?"), ("X", "Incredibly. Every entry is about a boy I never spoke to.")],
    ],
    "plans": [
        [("X", "Are you around at all next month? We should try to catch up properly."), ("Y", "I'd love that. Let me check my calendar and get back to you.")],
        [("X", "I've been meaning to ask, what are you doing for the holidays this year?"), ("Y", "Not sure yet. Probably a quiet one at home. You?"), ("X", "Same, I think. I need a rest.")],
        [("X", "I keep saying I'll start going to bed earlier and then it's midnight."), ("Y", "Every night. Every single night.")],
        [("X", "I'm going to try to read more this year. One book a month."), ("Y", "That's a good goal. I'll hold you to it.")],
        [("X", "Let's do a call next week, my treat. I'll bring the virtual cake."), ("Y", "Deal. I'll bring the virtual tea.")],
    ],
    "neighbours": [
        [("X", "My neighbours had a party till 3am last night."), ("Y", "Ugh. Did you go round?"), ("X", "No, I just lay there silently judging them.")],
        [("X", "The kids next door have started learning the recorder."), ("Y", "Oh no. Oh no no no.")],
        [("X", "Someone in my building keeps leaving their bike in the hallway and I keep walking into it."), ("Y", "Leave a passive-aggressive note. It's tradition.")],
        [("X", "My neighbour waved at me today and I waved back but it turned out she was waving at someone behind me."), ("Y", "Haha the worst feeling. Did you pretend to be stretching?")],
        [("X", "An old man on my street grows giant sunflowers every year. They're taller than his house now."), ("Y", "That's wonderful. Everyone needs a sunflower man.")],
    ],
    "random": [
        [("X", "There's a {breed} in my building that barks at literally everything, including leaves."), ("Y", "Haha, poor thing is probably just bored.")],
        [("X", "My cousin just got back from {dest} and her photos are unreal."), ("Y", "I've always wanted to go there. Someday.")],
        [("X", "I saw a man walking a cat on a lead today. Very calm cat."), ("Y", "Living the dream, that cat.")],
        [("X", "Do you think it's weird to have cereal for dinner three nights in a row?"), ("Y", "Not weird. Efficient.")],
        [("X", "I tried meditating this morning and fell asleep after two minutes."), ("Y", "That still counts as relaxing, I think.")],
        [("X", "There's a pigeon that sits on my windowsill every morning. I've named him Gerald."), ("Y", "Say hi to Gerald for me.")],
        [("X", "I got a parking ticket for being two minutes late. Two minutes!"), ("Y", "That's daylight robbery. Appeal it!")],
        [("X", "I've been learning to juggle from videos. I can do three balls for about four seconds."), ("Y", "That's four seconds more than me.")],
    ],
}
WEATHER_MORE = {
    "winter": [("The pipes in our building froze this morning, no water till lunch", "Oh no. It's been bitter here too, I've been living in my big coat"),
               ("It gets dark at four, I feel like a bear", "Same. I just want to hibernate till March")],
    "spring": [("Saw the first daffodils of the year on my walk today", "Spring! Finally. I've been waiting for this all winter"),
               ("It was warm enough to have the window open all day", "Bliss. Ours has been open too, the birds are so loud in the morning")],
    "summer": [("I got sunburnt just walking to the shops", "Haha the classic. Sun cream, my friend!"),
               ("There's a heatwave warning here for the weekend", "Stay inside with the curtains closed, that's my plan")],
    "autumn": [("I put the heating on for the first time today, it's official", "Noooo, don't say that, I'm not ready for winter"),
               ("Went for a walk and the whole park smelled like bonfires", "Best smell of the year honestly")],
}


def filler_block(cv, si, X, Y):
    """One small-talk exchange for session si, used at most once in this conversation where it can."""
    rng = cv.rng
    names = [n for n in OTHER_NAMES if n not in cv.used]
    d = {"X": X.name, "Y": Y.name, "Xcity": X.city, "Ycity": Y.city,
         "show": ch(rng, SHOWS), "dish": ch(rng, DISHES), "wd": WDAYS[cv.day(si).weekday()],
         "dest": ch(rng, [x[0] for x in DESTS]), "breed": ch(rng, DOGS), "name": ch(rng, names or OTHER_NAMES)}
    sea = season(cv.day(si), X.south)
    cands = []
    for topic, exchanges in SMALL.items():
        if topic == "weather":
            pairs = WEATHER[sea] + WEATHER_MORE[sea]
            exchanges = [[("X", a if a[-1] in ".!?" else a + "."), ("Y", b if b[-1] in ".!?" else b + ".")] for a, b in pairs]
        for i, ex in enumerate(exchanges):
            key = ("small", topic, sea if topic == "weather" else "", i)
            cands.append((cv.fill_use.get(key, 0), rng.random(), key, ex))
    cands.sort(key=lambda c: (c[0], c[1]))
    _, _, key, ex = cands[0]
    cv.fill_use[key] = cv.fill_use.get(key, 0) + 1
    return [(X.name if r == "X" else Y.name, fill(t, d), None) for r, t in ex]


def greeting(cv, si, A, B):
    rng = cv.rng
    d = {"A": A.name, "B": B.name, "wd": WDAYS[cv.day(si).weekday()]}
    g = ch(rng, [
        [("A", "Hey {B}! How's your week going?"), ("B", "Hey! Busy but good. You?")],
        [("A", "{B}! Long time no chat. What's new?"), ("B", "Hi {A}! Honestly a lot, where do I even start")],
        [("A", "Morning! I'm on my second coffee already."), ("B", "Haha same energy. Morning {A}!")],
        [("A", "Hiii, you around?"), ("B", "Yep, just got home. What's up?")],
        [("A", "Hey stranger."), ("B", "I know, I know, I've been terrible at replying. Sorry!")],
        [("A", "Happy {wd}!"), ("B", "Hey {A}! Is it really {wd} already?")],
        [("A", "Hey {B}, got a minute?"), ("B", "Always. What's going on?")],
        [("A", "Hello hello!"), ("B", "Hey you! How are things?")],
    ])
    return [(A.name if r == "A" else B.name, fill(t, d), None) for r, t in g]


def closing(cv, si, A, B):
    rng = cv.rng
    d = {"A": A.name, "B": B.name}
    g = ch(rng, [
        [("A", "Okay, I have to run, dinner's ready. Talk soon!"), ("B", "Go go! Bye!")],
        [("A", "Anyway, I should get some sleep. Talk later?"), ("B", "Night! Chat soon 😊")],
        [("A", "Gotta head into a meeting. Catch you this weekend?"), ("B", "Sure thing, good luck!")],
        [("A", "Alright, I'll let you go. Take care!"), ("B", "You too, bye!")],
        [("A", "I need to go before I eat the whole bag of crisps."), ("B", "Haha fair. Bye!")],
        [("A", "So good to catch up, {B}."), ("B", "Always. Speak soon!")],
    ])
    return [(A.name if r == "A" else B.name, fill(t, d), None) for r, t in g]


def assemble(cv, greet, body, close):
    """Turns of one session from its blocks: two turns of one speaker in a row are merged into
    one turn, or get a short reply from the other between them."""
    rng = cv.rng
    lines = [(s, t, g, i == 0) for s, t, g in greet for i in [1]]
    for bl in body:
        lines.extend((s, t, g, i == 0) for i, (s, t, g) in enumerate(bl))
    lines.extend((s, t, g, False) for s, t, g in close)
    turns = []
    for spk, text, tag, first in lines:
        if turns and turns[-1][0] == spk:
            prev = turns[-1][1]
            if prev[-1:].isalnum():
                prev += "."
            if rng.random() < 0.9 and len(prev) + len(text) < 300:
                if first and len(turns) > 2 and rng.random() < 0.35:
                    prev += " " + ch(rng, TRANSITIONS)
                turns[-1] = (spk, prev + " " + text, turns[-1][2] + ([tag] if tag else []))
                continue
            turns[-1] = (spk, prev, turns[-1][2])
            other = [p.name for p in cv.people if p.name != spk][0]
            turns.append((other, ch(rng, BRIDGES), []))
        turns.append((spk, text, [tag] if tag else []))
    return turns


def render(cv):
    """Sessions of turns; returns (sessions, tag -> dia id)."""
    rng = cv.rng
    a, b = cv.people
    sessions, where = [], {}
    for si in range(cv.n):
        A, B = (a, b) if rng.random() < 0.5 else (b, a)
        target = rng.randint(15, 30)
        body = [(list(bl), False) for bl in cv.blocks[si]]
        rng.shuffle(body)
        greet, close = greeting(cv, si, A, B), closing(cv, si, A, B)
        for _ in range(60):
            turns = assemble(cv, greet, [bl for bl, _ in body], close)
            if len(turns) < target:
                X, Y = (a, b) if rng.random() < 0.5 else (b, a)
                body.insert(rng.randint(0, len(body)), (filler_block(cv, si, X, Y), True))
            elif len(turns) > 30 and any(f for _, f in body):
                i = max(i for i, (_, f) in enumerate(body) if f)
                del body[i]
            else:
                break
        # people add asides and say each other's names; not in greetings and goodbyes
        for i in range(2, len(turns) - 2):
            spk, text, tags = turns[i]
            if len(text) < 12 or len(text) > 200:
                continue
            x = rng.random()
            if x < 0.2 and text[-1] in ".!":
                text = text + " " + ch(rng, ASIDES)
            elif x < 0.3 and text[0].isupper() and not text.startswith("I "):
                other = [p.name for p in cv.people if p.name != spk][0]
                first = text.split(" ", 1)[0]
                if first not in (a.name, b.name) and first.rstrip(",.!?") not in OTHER_NAMES + PET_NAMES:
                    pre = fill(ch(rng, ADDRESS), {"o": other})
                    text = pre + (text[0].lower() + text[1:] if pre.endswith(", ") else text)
            turns[i] = (spk, text, tags)
        out = []
        for ti, (spk, text, tags) in enumerate(turns, 1):
            tid = f"D{si + 1}:{ti}"
            for t in tags:
                where[t] = tid
            out.append({"id": tid, "speaker": spk, "text": text})
        sessions.append({"id": si + 1, "date": cv.dates[si].strftime("%Y-%m-%dT%H:%M:00Z"), "turns": out})
    return sessions, where


def select_questions(cv, qs):
    rng = cv.rng
    out = []
    for kind, n in KIND_TARGETS.items():
        cands = [q for q in qs if q["kind"] == kind]
        groups = {}
        for q in cands:
            groups.setdefault(str(q["sl"]), []).append(q)
        keys = sorted(groups)
        rng.shuffle(keys)
        for k in keys:
            rng.shuffle(groups[k])
        picked = []
        while len(picked) < n and any(groups[k] for k in keys):
            for k in keys:
                if groups[k] and len(picked) < n:
                    picked.append(groups[k].pop())
        out.extend(picked)
    return out


def build_conversation(rng, ci, used_names, used):
    pool = [x for x in NAMES if x[0] not in used_names]
    (na, ga), (nb, gb) = rng.sample(pool, 2)
    used_names.update([na, nb])
    local = set()
    a = make_person(rng, na, ga, used, local)
    b = make_person(rng, nb, gb, used, local)
    if rng.random() < 0.4:  # same city
        b.city, b.south, b.hoods, b.town = a.city, a.south, a.hoods, a.town
        b.hood = rng.choice(a.hoods)
    cv = Conv(rng, f"conv-{ci + 1}", a, b)
    cv.used |= local
    kinds = sorted(STORYLINES)
    taken = set()
    for P, O in ((a, b), (b, a)):
        want = 6 if cv.n >= 24 else 5
        got = 0
        # the two people live different stories; only a hobby can be on both sides
        for k in rng.sample(kinds, len(kinds)):
            if got >= want:
                break
            if k in taken and k != "hobby":
                continue
            state = (list(cv.load), [list(x) for x in cv.blocks], len(cv.questions), cv.tagn, set(cv.used),
                     {n: list(v) for n, v in cv.traits.items()})
            cv.sl = f"{P.name}-{k}"
            try:
                STORYLINES[k](cv, P, O)
                got += 1
                taken.add(k)
            except Retry:
                cv.load, cv.blocks = state[0], state[1]
                del cv.questions[state[2]:]
                cv.tagn, cv.used, cv.traits = state[3], state[4], state[5]
        mine = [t for t in ONEOFFS if ("oneoff", t["id"]) not in taken]
        for tpl in rng.sample(mine, 7):
            taken.add(("oneoff", tpl["id"]))
            cv.sl = f"{P.name}-oneoff-{tpl['id']}"
            add_oneoff(cv, P, O, tpl)
    trait_questions(cv)
    sessions, where = render(cv)
    qs = []
    true_texts = {q["question"] for q in cv.questions if q["kind"] != "adversarial"}
    seen = set()
    for q in cv.questions:
        q = dict(q)
        if q["question"] in seen or (q["kind"] == "adversarial" and q["question"] in true_texts):
            continue  # asked twice, or a "wrong person" question that is true of that person
        seen.add(q["question"])
        q["evidence"] = [where[t] for t in q["evidence"]]
        if q["kind"] == "multi-hop" and len({e.split(":")[0] for e in q["evidence"]}) < 2:
            continue  # must span sessions
        qs.append(q)
    chosen = select_questions(cv, qs)
    order = {k: i for i, k in enumerate(KIND_TARGETS)}
    chosen.sort(key=lambda q: (order[q["kind"]], q["question"]))
    out_q = []
    for i, q in enumerate(chosen, 1):
        q.pop("sl", None)
        ev = sorted(set(q["evidence"]), key=lambda e: (int(e[1:].split(":")[0]), int(e.split(":")[1])))
        item = {"conv": cv.cid, "id": f"{cv.cid}-q{i}", "kind": q["kind"], "question": q["question"],
                "evidence": ev, "answer": q["answer"]}
        for k in ("date", "date_precision", "subtype"):
            if k in q:
                item[k] = q[k]
        out_q.append(item)
    conv = {"id": cv.cid, "speakers": [a.name, b.name], "sessions": sessions}
    return conv, out_q


STOP = set("""a an the and or but if of at by for with about against between into through during before after
above below to from up down in out on off over under again further then once here there when where why how all
any both each few more most other some such no nor not only own same so than too very s t can will just don
should now is are was were be been being have has had having do does did doing i me my we our you your he him
his she her it its they them their what which who whom this that these those am would could get got""".split())


def words(s):
    return [w for w in re.findall(r"[a-z0-9']+", s.lower().replace("'s", "")) if w not in STOP and len(w) > 2]


def stem(w):
    for suf in ("ing", "ed", "es", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)]
    return w


def overlap_stats(convs, questions, names):
    """Share of each question's content words (names left out) that appear in its evidence turns."""
    text = {}
    for c in convs:
        for s in c["sessions"]:
            for t in s["turns"]:
                text[(c["id"], t["id"])] = t["text"]
    per = {}
    for q in questions:
        ev = " ".join(text[(q["conv"], e)] for e in q["evidence"])
        qw = {stem(w) for w in words(q["question"]) if w not in names}
        ew = {stem(w) for w in words(ev)}
        if qw:
            per.setdefault(q["kind"], []).append(len(qw & ew) / len(qw))
    return {k: round(sum(v) / len(v), 3) for k, v in per.items()}


def validate(doc):
    """Every evidence id names a turn of its conversation; kinds and dates are as labelled."""
    ids = {c["id"]: {t["id"] for s in c["sessions"] for t in s["turns"]} for c in doc["conversations"]}
    seen = set()
    for c in doc["conversations"]:
        assert 20 <= len(c["sessions"]) <= 30, c["id"]
        for s in c["sessions"]:
            assert 15 <= len(s["turns"]) <= 30, (c["id"], s["id"], len(s["turns"]))
            for a, b in zip(s["turns"], s["turns"][1:]):
                assert a["speaker"] != b["speaker"], (c["id"], a["id"])
    for q in doc["questions"]:
        assert q["kind"] in KIND_TARGETS, q
        assert q["evidence"] and all(e in ids[q["conv"]] for e in q["evidence"]), q
        assert (q["conv"], q["question"]) not in seen, q
        seen.add((q["conv"], q["question"]))
        if q["kind"] == "temporal":
            assert q.get("date"), q
        if q["kind"] == "multi-hop":
            assert len({e.split(":")[0] for e in q["evidence"]}) >= 2, q


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--conversations", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "devset.json"))
    ap.add_argument("--stats", action="store_true", help="print counts and question/evidence word overlap")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    used_names, used = set(), set()
    convs, questions = [], []
    for ci in range(args.conversations):
        c, qs = build_conversation(rng, ci, used_names, used)
        convs.append(c)
        questions.extend(qs)
    kinds = {}
    for q in questions:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    meta = {"generator": "bench/devset/gen.py", "seed": args.seed,
            "conversations": len(convs), "sessions": sum(len(c["sessions"]) for c in convs),
            "turns": sum(len(s["turns"]) for c in convs for s in c["sessions"]),
            "questions": len(questions), "kinds": kinds,
            "turn_ids": "D<session>:<turn>, both from 1, as in LoCoMo"}
    doc = {"meta": meta, "conversations": convs, "questions": questions}
    validate(doc)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    size = os.path.getsize(args.out)
    print(f"wrote {args.out}: {size / 1e6:.2f} MB, {meta['conversations']} conversations, "
          f"{meta['sessions']} sessions, {meta['turns']} turns, {len(questions)} questions {kinds}")
    if args.stats:
        names = {n.lower() for n, _ in NAMES} | {n.lower() for n in OTHER_NAMES} | {p.lower() for p in PET_NAMES}
        tl = [len(t["text"]) for c in convs for s in c["sessions"] for t in s["turns"]]
        per_s = [len(s["turns"]) for c in convs for s in c["sessions"]]
        print(f"turns per session: min {min(per_s)} max {max(per_s)} mean {sum(per_s) / len(per_s):.1f}; "
              f"turn length mean {sum(tl) / len(tl):.0f} chars")
        evn = [t for c in convs for s in c["sessions"] for t in s["turns"]]
        evset = {(q["conv"], e) for q in questions for e in q["evidence"]}
        print(f"evidence turns: {len(evset)} of {len(evn)} turns ({100 * len(evset) / len(evn):.1f} %)")
        print("question words found in the evidence (mean share, names excluded):", overlap_stats(convs, questions, names))


if __name__ == "__main__":
    sys.exit(main())
