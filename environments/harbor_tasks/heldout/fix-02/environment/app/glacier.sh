#!/bin/bash
echo "cahlk 20"
