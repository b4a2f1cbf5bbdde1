"""The function templates the synthetic BFCL training items are made from (``synthetic.py`` makes the
items): each a function documented as BFCL documents one, with typed parameters, the values a request may
ask for, and how a user asks for one call or several. All invented here; none is a BFCL function
(``tests/interop/bfcl/test_synthetic.py`` checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TEMPLATES_VERSION = 2
"""Bumped whenever the templates or the phrasings change, so a run records which items it trained on
(1: 19 functions, two or three calls per several-call request; 2: 35 functions, two to four calls,
three phrasings of a parallel request, a function offered but not asked for)."""


@dataclass(frozen=True)
class Param:
    """One parameter: its BFCL type (``integer``, ``float``, ``string``, ``boolean``, ``array`` of
    integers), its doc, and the values a request may ask for."""

    name: str
    type: str
    description: str
    values: tuple[Any, ...]
    required: bool = True
    default: Any = None
    said: str = ""
    """What a request calls it ("Do the same with {said} 5"); its name in words when empty."""


@dataclass(frozen=True)
class Template:
    """A function and how a user asks for it: ``ask`` names every parameter by ``{name}``; ``ask_many``
    asks for the first parameter's several values at once (``{name}`` there is "3, 5 and 7"), the other
    parameters the same in every call. An optional parameter is asked for in ``ask_optional`` (appended
    to the request) when a draw includes it, else left to its default."""

    name: str
    description: str
    params: tuple[Param, ...]
    ask: str
    ask_many: str
    ask_optional: str = ""

    def doc(self) -> dict[str, Any]:
        """The function as BFCL documents one (its ``function`` entry)."""
        properties: dict[str, Any] = {}
        for p in self.params:
            prop: dict[str, Any] = {"type": p.type, "description": p.description}
            if p.type == "array":
                prop["items"] = {"type": "integer"}
            if not p.required and p.default is not None:
                prop["default"] = p.default
            properties[p.name] = prop
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {
                "type": "dict",
                "properties": properties,
                "required": [p.name for p in self.params if p.required],
            },
        }


def _ints(lo: int, hi: int, step: int = 1) -> tuple[int, ...]:
    return tuple(range(lo, hi + 1, step))


CITIES = ("Lisbon", "Osaka", "Nairobi", "Denver", "Krakow", "Lima", "Perth", "Quebec City")
TEMPLATES: tuple[Template, ...] = (
    Template(
        "shapes.sector_area",
        "Area of a circular sector.",
        (
            Param("radius", "float", "Radius of the circle.", (1.5, 2.0, 4.5, 6.0, 7.5, 12.0)),
            Param("angle", "integer", "Central angle in degrees.", (30, 45, 60, 90, 120)),
        ),
        "What is the area of a sector with radius {radius} and a central angle of {angle} degrees?",
        "Find the areas of sectors with radius {radius}, each with a central angle of {angle} degrees.",
    ),
    Template(
        "shapes.trapezoid_area",
        "Area of a trapezoid from its two parallel sides and its height.",
        (
            Param(
                "base_a",
                "integer",
                "Length of the first parallel side.",
                _ints(3, 30),
                said="a first side of",
            ),
            Param("base_b", "integer", "Length of the second parallel side.", _ints(4, 40)),
            Param("height", "integer", "Distance between the parallel sides.", _ints(2, 20)),
        ),
        "Compute the area of a trapezoid with parallel sides {base_a} and {base_b} and height {height}.",
        "Compute the areas of trapezoids whose first parallel side is {base_a}, with the other side "
        "{base_b} and height {height}.",
    ),
    Template(
        "number_theory.count_divisors",
        "Count the positive divisors of an integer.",
        (Param("n", "integer", "The integer.", _ints(12, 600), said="number"),),
        "How many positive divisors does {n} have?",
        "How many positive divisors do {n} have?",
    ),
    Template(
        "number_theory.digit_sum",
        "Sum of the decimal digits of a non-negative integer.",
        (Param("n", "integer", "The integer.", _ints(100, 99999, 37), said="number"),),
        "Give me the sum of the digits of {n}.",
        "Give me the digit sums of {n}.",
    ),
    Template(
        "physics.kinetic_energy_of",
        "Kinetic energy of a moving body in joules.",
        (
            Param(
                "mass_kg",
                "float",
                "Mass in kilograms.",
                (0.5, 2.0, 3.5, 10.0, 75.0, 1200.0),
                said="mass",
            ),
            Param("speed_mps", "float", "Speed in metres per second.", (1.5, 4.0, 9.8, 20.0, 33.0)),
        ),
        "What is the kinetic energy of a {mass_kg} kg object moving at {speed_mps} m/s?",
        "What are the kinetic energies of objects of {mass_kg} kg, all moving at {speed_mps} m/s?",
    ),
    Template(
        "physics.pendulum_period",
        "Period of a simple pendulum in seconds.",
        (
            Param(
                "length_m",
                "float",
                "Length of the pendulum in metres.",
                (0.25, 0.5, 1.0, 2.5),
                said="length",
            ),
            Param(
                "gravity",
                "float",
                "Gravitational acceleration in m/s^2. Default 9.81.",
                (1.62, 3.71, 24.79),
                required=False,
                default=9.81,
            ),
        ),
        "Find the period of a simple pendulum {length_m} m long.",
        "Find the periods of simple pendulums {length_m} m long.",
        " Use a gravitational acceleration of {gravity} m/s^2.",
    ),
    Template(
        "finance.loan_payment_monthly",
        "Monthly payment of a fixed-rate loan.",
        (
            Param("principal", "integer", "Amount borrowed.", _ints(5000, 400000, 2500)),
            Param(
                "annual_rate", "float", "Yearly interest rate in percent.", (2.5, 3.9, 4.25, 6.0)
            ),
            Param("years", "integer", "Term of the loan in years.", (5, 10, 15, 20, 30)),
        ),
        "What is the monthly payment on a loan of {principal} at {annual_rate}% a year over {years} "
        "years?",
        "What are the monthly payments on loans of {principal}, each at {annual_rate}% a year over "
        "{years} years?",
    ),
    Template(
        "finance.future_value_of",
        "Future value of a deposit with yearly compounding.",
        (
            Param("deposit", "integer", "Amount deposited today.", _ints(100, 50000, 50)),
            Param("rate", "float", "Yearly interest rate as a decimal.", (0.02, 0.035, 0.05, 0.07)),
            Param("years", "integer", "Number of years.", _ints(1, 40)),
        ),
        "How much will a deposit of {deposit} be worth after {years} years at a rate of {rate}?",
        "How much will deposits of {deposit} be worth after {years} years at a rate of {rate}?",
    ),
    Template(
        "chem.moles_from_mass",
        "Number of moles in a mass of a compound.",
        (
            Param("compound", "string", "Chemical formula.", ("NaCl", "H2O", "CO2", "C6H12O6")),
            Param("grams", "float", "Mass in grams.", (5.0, 18.0, 44.0, 58.5, 100.0, 250.0)),
        ),
        "How many moles are there in {grams} grams of {compound}?",
        "How many moles are there in {grams} grams of {compound}?",
    ),
    Template(
        "chem.dilution_volume",
        "Volume of stock solution needed for a dilution (C1 V1 = C2 V2), in millilitres.",
        (
            Param(
                "stock_molar",
                "float",
                "Concentration of the stock in mol/L.",
                (1.0, 2.0, 6.0),
                said="a stock of molarity",
            ),
            Param("target_molar", "float", "Wanted concentration in mol/L.", (0.1, 0.25, 0.5)),
            Param("target_ml", "integer", "Wanted volume in millilitres.", (100, 250, 500, 1000)),
        ),
        "How much {stock_molar} M stock do I need to make {target_ml} mL of a {target_molar} M "
        "solution?",
        "How much {stock_molar} M stock do I need for {target_ml} mL of a {target_molar} M solution?",
    ),
    Template(
        "stats.sample_variance",
        "Sample variance of a list of numbers.",
        (
            Param(
                "values",
                "array",
                "The numbers.",
                ((2, 4, 4, 5), (1, 3, 5, 7, 9), (10, 12, 23, 23, 16), (3, 3, 8)),
            ),
        ),
        "Compute the sample variance of {values}.",
        "Compute the sample variances of {values}.",
    ),
    Template(
        "stats.binomial_probability_of",
        "Probability of exactly k successes in n independent trials.",
        (
            Param("trials", "integer", "Number of trials.", _ints(5, 40)),
            Param("successes", "integer", "Number of successes.", _ints(0, 5)),
            Param("p", "float", "Probability of success in one trial.", (0.1, 0.25, 0.5, 0.6)),
        ),
        "What is the probability of exactly {successes} successes in {trials} trials with success "
        "probability {p}?",
        "What are the probabilities of exactly {successes} successes in {trials} trials, each with "
        "success probability {p}?",
    ),
    Template(
        "convert.length_units",
        "Convert a length from one unit to another.",
        (
            Param("value", "float", "The length.", (1.0, 3.5, 12.0, 26.2, 100.0)),
            Param("from_unit", "string", "Unit of the value.", ("miles", "feet", "inches")),
            Param("to_unit", "string", "Unit to convert to.", ("kilometers", "meters")),
        ),
        "Convert {value} {from_unit} to {to_unit}.",
        "Convert {value} {from_unit} to {to_unit}.",
    ),
    Template(
        "convert.celsius_to_kelvin",
        "Convert a temperature in degrees Celsius to kelvin.",
        (
            Param(
                "celsius",
                "float",
                "Temperature in degrees Celsius.",
                (-40.0, 0.0, 21.5, 37.0),
                said="degrees Celsius",
            ),
        ),
        "What is {celsius} degrees Celsius in kelvin?",
        "What are {celsius} degrees Celsius in kelvin?",
    ),
    Template(
        "calendar.days_between_dates",
        "Number of days between two dates (YYYY-MM-DD).",
        (
            Param("start", "string", "First date.", ("2021-03-01", "2022-07-15", "2019-12-24")),
            Param("end", "string", "Second date.", ("2023-01-01", "2024-02-29", "2025-06-30")),
        ),
        "How many days are there between {start} and {end}?",
        "Count the days to {end} from each of these dates: {start}.",
    ),
    Template(
        "travel.flight_time_estimate",
        "Estimated flight time between two cities, in hours.",
        (
            Param("origin", "string", "City of departure.", CITIES),
            Param("destination", "string", "City of arrival.", CITIES),
            Param(
                "cruise_kmh",
                "integer",
                "Cruising speed in km/h. Default 850.",
                (700, 800, 900),
                required=False,
                default=850,
            ),
        ),
        "Estimate the flight time from {origin} to {destination}.",
        "Estimate the flight times from {origin} to {destination}.",
        " Assume a cruising speed of {cruise_kmh} km/h.",
    ),
    Template(
        "weather.monthly_rainfall",
        "Average rainfall of a city in a month, in millimetres.",
        (
            Param("city", "string", "Name of the city.", CITIES),
            Param("month", "string", "Name of the month.", ("January", "April", "July", "October")),
        ),
        "What is the average rainfall in {city} in {month}?",
        "What is the average rainfall in {city} in {month}?",
    ),
    Template(
        "sports.team_win_ratio",
        "Share of games a team won in a season.",
        (
            Param("team", "string", "Name of the team.", ("Rovers", "Comets", "Falcons", "Tigers")),
            Param("season", "integer", "Year the season started.", _ints(2010, 2023)),
        ),
        "What share of its games did the {team} win in the {season} season?",
        "What share of their games did the {team} win in the {season} season?",
    ),
    Template(
        "cooking.scale_recipe_grams",
        "Scale an ingredient's amount in grams to a new number of servings.",
        (
            Param(
                "servings_to",
                "integer",
                "Servings wanted.",
                (1, 3, 5, 8, 10),
                said="servings",
            ),
            Param("grams", "integer", "Amount in the recipe.", _ints(50, 800, 25)),
            Param("servings_from", "integer", "Servings the recipe makes.", (2, 4, 6)),
        ),
        "A recipe for {servings_from} uses {grams} g of flour; how much do I need for "
        "{servings_to} servings?",
        "A recipe for {servings_from} uses {grams} g of flour; how much do I need for "
        "{servings_to} servings?",
    ),
    Template(
        "geometry_cone_volume",
        "Volume of a right circular cone.",
        (
            Param("radius", "float", "Radius of the base.", (1.0, 2.5, 3.0, 4.0, 7.5, 10.0)),
            Param("height", "float", "Height of the cone.", (2.0, 5.0, 6.5, 9.0, 12.0)),
        ),
        "Calculate the volume of a cone with base radius {radius} and height {height}.",
        "Calculate the volumes of cones with base radius {radius}, all of height {height}.",
    ),
    Template(
        "numbers.greatest_common_divisor_of",
        "Greatest common divisor of two positive integers.",
        (
            Param("a", "integer", "The first integer.", _ints(12, 240, 6), said="first number"),
            Param("b", "integer", "The second integer.", _ints(8, 180, 4)),
        ),
        "Find the greatest common divisor of {a} and {b}.",
        "Find the greatest common divisor of {b} with each of {a}.",
    ),
    Template(
        "physics.free_fall_duration",
        "Time in seconds for an object dropped from rest to fall a height.",
        (
            Param(
                "height_m",
                "float",
                "Height of the drop in metres.",
                (5.0, 20.0, 45.0, 80.0),
                said="height",
            ),
            Param(
                "gravity",
                "float",
                "Gravitational acceleration in m/s^2. Default 9.81.",
                (1.62, 3.71, 8.87),
                required=False,
                default=9.81,
            ),
        ),
        "How long does an object take to fall {height_m} metres from rest?",
        "How long do objects take to fall {height_m} metres from rest?",
        " Take the gravitational acceleration as {gravity} m/s^2.",
    ),
    Template(
        "finance.compound_interest_total",
        "Total amount after compound interest.",
        (
            Param("principal", "integer", "Starting amount.", _ints(1000, 90000, 500)),
            Param("annual_rate", "float", "Yearly rate as a decimal.", (0.03, 0.045, 0.06, 0.08)),
            Param("years", "integer", "Number of years.", _ints(2, 30)),
            Param(
                "times_per_year",
                "integer",
                "Compounding periods per year. Default 1.",
                (4, 12, 365),
                required=False,
                default=1,
            ),
        ),
        "What will {principal} grow to in {years} years at an annual rate of {annual_rate}?",
        "What will principals of {principal} grow to in {years} years at an annual rate of "
        "{annual_rate}?",
        " Compound it {times_per_year} times a year.",
    ),
    Template(
        "health.body_mass_index",
        "Body mass index from weight and height.",
        (
            Param(
                "weight_kg",
                "float",
                "Weight in kilograms.",
                (48.5, 60.0, 72.5, 85.0, 101.0),
                said="weight",
            ),
            Param("height_m", "float", "Height in metres.", (1.55, 1.62, 1.7, 1.78, 1.91)),
        ),
        "What is the BMI of a person weighing {weight_kg} kg who is {height_m} m tall?",
        "What are the BMIs of people weighing {weight_kg} kg, each {height_m} m tall?",
    ),
    Template(
        "astro.orbital_period_years",
        "Orbital period of a planet around the Sun from its semi-major axis (Kepler's third law).",
        (
            Param(
                "semi_major_axis_au",
                "float",
                "Semi-major axis in AU.",
                (0.39, 0.72, 1.52, 5.2, 9.5),
                said="a semi-major axis of",
            ),
        ),
        "What is the orbital period of a planet with a semi-major axis of {semi_major_axis_au} AU?",
        "What are the orbital periods of planets with semi-major axes of {semi_major_axis_au} AU?",
    ),
    Template(
        "geo.utc_offset_of_city",
        "Current UTC offset of a city, in hours.",
        (Param("city", "string", "Name of the city.", CITIES),),
        "What is the UTC offset of {city} right now?",
        "What are the UTC offsets of {city} right now?",
    ),
    Template(
        "music.beat_length_ms",
        "Length of one note in milliseconds at a tempo.",
        (
            Param("bpm", "integer", "Tempo in beats per minute.", (60, 90, 100, 120, 128, 140)),
            Param(
                "note",
                "string",
                "Note value: quarter, eighth or sixteenth. Default quarter.",
                ("eighth", "sixteenth"),
                required=False,
                default="quarter",
            ),
        ),
        "How long is one beat at {bpm} bpm in milliseconds?",
        "How long is one beat in milliseconds at {bpm} bpm?",
        " Give it for a {note} note.",
    ),
    Template(
        "text_vowel_count",
        "Count the vowels in a word or phrase.",
        (
            Param(
                "text",
                "string",
                "The text to count in.",
                ("banana", "encyclopedia", "rhythm", "queueing", "onomatopoeia", "strengths"),
            ),
        ),
        "How many vowels are in the word '{text}'?",
        "How many vowels are in each of the words '{text}'?",
    ),
    Template(
        "electric.current_from_ohms_law",
        "Current in amperes through a resistor (I = V / R).",
        (
            Param("voltage", "float", "Voltage in volts.", (1.5, 5.0, 9.0, 12.0, 230.0)),
            Param("resistance", "float", "Resistance in ohms.", (2.0, 10.0, 47.0, 220.0, 1000.0)),
        ),
        "What current flows through a {resistance} ohm resistor at {voltage} volts?",
        "What currents flow at {voltage} volts through a {resistance} ohm resistor?",
    ),
    Template(
        "stats_median_of",
        "Median of a list of numbers.",
        (
            Param(
                "numbers",
                "array",
                "The numbers.",
                ((7, 1, 4), (3, 9, 2, 8), (12, 15, 11, 20, 13), (5, 5, 6, 1), (40, 10, 30)),
            ),
        ),
        "What is the median of {numbers}?",
        "What are the medians of {numbers}?",
    ),
    Template(
        "inventory.restock_amount",
        "Units to order to bring an item's stock up to a target.",
        (
            Param("item", "string", "Name of the item.", ("bolts", "paper towels", "coffee beans")),
            Param("on_hand", "integer", "Units in stock now.", _ints(0, 120, 5)),
            Param("target", "integer", "Units wanted in stock.", _ints(150, 400, 25)),
        ),
        "We have {on_hand} {item} in stock; how many should we order to reach {target}?",
        "How many {item} should we order to reach {target} if we have {on_hand} in stock?",
    ),
    Template(
        "polygon_interior_angle",
        "Interior angle of a regular polygon, in degrees.",
        (Param("sides", "integer", "Number of sides.", _ints(3, 20)),),
        "What is each interior angle of a regular polygon with {sides} sides?",
        "What is each interior angle of regular polygons with {sides} sides?",
    ),
    Template(
        "combinatorics.combinations_count",
        "Number of ways to choose k items from n without order.",
        (
            Param("n", "integer", "Number of items.", _ints(5, 52)),
            Param("k", "integer", "Number chosen.", _ints(2, 6)),
        ),
        "In how many ways can I choose {k} items out of {n}?",
        "In how many ways can I choose {k} items out of {n}?",
    ),
    Template(
        "currency.exchange_amount",
        "Convert an amount of money between currencies at today's rate.",
        (
            Param("amount", "integer", "Amount to convert.", _ints(20, 5000, 10)),
            Param(
                "from_currency",
                "string",
                "Three-letter code of the currency held.",
                ("USD", "EUR", "JPY"),
            ),
            Param(
                "to_currency", "string", "Three-letter code to convert to.", ("GBP", "CHF", "INR")
            ),
        ),
        "Convert {amount} {from_currency} to {to_currency}.",
        "Convert {amount} {from_currency} to {to_currency}.",
    ),
    Template(
        "reading.minutes_to_finish",
        "Minutes needed to read a number of pages.",
        (
            Param("pages", "integer", "Number of pages.", _ints(40, 900, 20)),
            Param(
                "words_per_minute",
                "integer",
                "Reading speed. Default 250.",
                (180, 300, 400),
                required=False,
                default=250,
            ),
        ),
        "How many minutes will it take to read a book of {pages} pages?",
        "How many minutes will it take to read books of {pages} pages?",
        " I read {words_per_minute} words per minute.",
    ),
)
"""The functions and their phrasings (all invented here; none is a BFCL function)."""

__all__ = ["CITIES", "TEMPLATES", "TEMPLATES_VERSION", "Param", "Template"]
