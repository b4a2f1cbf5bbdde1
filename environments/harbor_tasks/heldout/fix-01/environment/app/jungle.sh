#!/bin/bash
echo "parort 36"
